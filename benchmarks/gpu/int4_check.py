"""Chapter 41a on the GPU: the W4A16 kernels against chapter 41's reference at the Qwen2.5 shapes, a batch-1
microbenchmark against bf16 (cuBLAS) and chapter 40a's int8 kernel, a sweep of the matrix-vector launch rule, and
the row thresholds (INT4_GEMV_MAX_M, INT4_DOT_MAX_M) on the 7B merged gate/up matrix.

    python benchmarks/gpu/int4_check.py [--out DIR] [--skip-sweep]       (H100/H200, about 3 min)

Timings are benchmarks/gpu/gemv_sweep.py's: one CUDA graph over enough copies of the weight (>= 512 MB) that the
50 MB L2 cache cannot hold them, divided by the copies. GB/s counts the weight bytes a product reads (int4: the
codes plus the bf16 scales and minimums; int8: codes plus one scale per row; bf16: the matrix).
"""
import argparse
import itertools
import math

import torch
import torch.nn.functional as F

from common import copy_bandwidth, env, save, table
from gemv_sweep import graph_us, shapes_of

GRIDS = {"int4 g64": (64, False), "int4 g128 sym": (128, True), "int4 g32 (gguf Q4_1)": (32, False)}


def ulps(y: torch.Tensor, exact: torch.Tensor) -> float:
    "Largest distance of bf16 y from the float64 result, in bf16 units in the last place there (floor 1/16)."
    unit = torch.exp2(torch.floor(torch.log2(exact.abs().clamp_min(2.0 ** -4))) - 7)
    return ((y.double() - exact).abs() / unit).max().item()


def int4_bytes(q, s, m) -> int:
    return sum(t.numel() * t.element_size() for t in (q, s, m) if t is not None)


@torch.no_grad()
def check() -> list[dict]:
    "Every 0.5B and 7B shape, three grids, M = 1, 3, 16, 64 (kernels) and 200 (dequantize + cuBLAS), bf16; fp32 at 0.5B."
    from mini_infer.kernels.triton_int4 import int4_linear_kernel, triton_int4_linear
    from mini_infer.quant.int4 import dequantize_int4, int4_linear_reference, quantize_int4
    torch.manual_seed(0)
    rows, worse = [], []
    for shape in ("Qwen2.5-0.5B", "Qwen2.5-7B"):
        for proj, (N, K) in shapes_of(shape).items():
            if proj == "lm_head":
                continue
            for grid, (gs, sym) in GRIDS.items():
                q, s, m = quantize_int4(torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5, gs, sym)
                b = 0.1 * torch.randn(N, device="cuda", dtype=torch.bfloat16)
                w64 = dequantize_int4(q, s, m).double()                                      # exact: fp32 of s q + m
                row = {"shape": shape, "proj": proj, "grid": grid}
                for M in (1, 3, 16, 64, 200):
                    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
                    got, ref = int4_linear_kernel(x, q, s, m, b), int4_linear_reference(x, q, s, m, b)
                    exact = x.double() @ w64.T + b.double()
                    u, u_ref = ulps(got, exact), ulps(ref, exact)
                    row[f"M{M}_ulp"], row[f"M{M}_equal"] = u, (got == ref).float().mean().item()
                    if M <= 64 and u > 1.0:                     # an fp32 sum rounded once: within one unit
                        worse.append(f"{shape} {proj} {grid} M={M}: {u:.2f} units (reference {u_ref:.2f})")
                    if M == 200:                                # W_hat rounded to bf16, then cuBLAS in bf16
                        cublas = F.linear(x, dequantize_int4(q, s, m, torch.bfloat16), b)
                        row["M200_vs_bf16_dequant_cublas"] = (got.float() - cublas.float()).abs().max().item()
                if shape == "Qwen2.5-0.5B":
                    x = torch.randn(16, K, device="cuda")
                    q32, s32, m32 = quantize_int4(torch.randn(N, K, device="cuda") / K ** 0.5, gs, sym)
                    row["fp32_M16_maxdiff"] = (triton_int4_linear(x, q32, s32, m32)
                                               - int4_linear_reference(x, q32, s32, m32)).abs().max().item()
                    row["fp32_M1_maxdiff"] = (triton_int4_linear(x[:1], q32, s32, m32)
                                              - int4_linear_reference(x[:1], q32, s32, m32)).abs().max().item()
                rows.append(row)
                print(row, flush=True)
    assert not worse, "more than one unit from the float64 result: " + "; ".join(worse)
    return rows


@torch.no_grad()
def bench(shape: str = "Qwen2.5-7B") -> list[dict]:
    "M = 1: bf16 cuBLAS, 40a's int8 kernel and the int4 kernel (three grids), microseconds and GB/s of weights."
    from mini_infer.kernels.triton_int4 import triton_int4_linear
    from mini_infer.kernels.triton_int8 import triton_int8_linear
    from mini_infer.quant.int4 import quantize_int4
    from mini_infer.quant.int8 import quantize_int8
    rows = []
    for proj, (N, K) in shapes_of(shape).items():
        if proj == "lm_head":
            continue
        x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        w0 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
        row = {"shape": shape, "proj": proj, "N": N, "K": K}
        copies = max(2, math.ceil(512e6 / (2 * N * K)))
        ws = [w0] + [w0.clone() for _ in range(copies - 1)]
        row["bf16_us"] = graph_us(lambda i: torch.mm(x, ws[i].t(), out=y), copies)
        row["bf16_GBps"] = 2 * N * K / row["bf16_us"] / 1e3
        del ws
        q8 = [quantize_int8(w0)]
        copies = max(2, math.ceil(512e6 / (N * K)))
        q8 += [tuple(t.clone() for t in q8[0]) for _ in range(copies - 1)]
        row["int8_us"] = graph_us(lambda i: triton_int8_linear(x, *q8[i], out=y), copies)
        row["int8_GBps"] = (N * K + 2 * N) / row["int8_us"] / 1e3
        del q8
        for grid, (gs, sym) in GRIDS.items():
            q4 = [quantize_int4(w0, gs, sym)]
            nbytes = int4_bytes(*q4[0])
            copies = max(2, math.ceil(512e6 / nbytes))
            q4 += [tuple(None if t is None else t.clone() for t in q4[0]) for _ in range(copies - 1)]
            row[f"{grid}_us"] = graph_us(lambda i: triton_int4_linear(x, *q4[i], out=y), copies)
            row[f"{grid}_GBps"] = nbytes / row[f"{grid}_us"] / 1e3
            del q4
        del w0
        torch.cuda.empty_cache()
        rows.append(row)
        print(row, flush=True)
    print(f"\n{shape}, M = 1, one product: microseconds and GB/s of weight bytes read")
    print(table(["proj", "N", "K", "bf16 us", "GB/s", "int8 us", "GB/s"]
                + [h for g in GRIDS for h in (f"{g} us", "GB/s", "vs bf16", "vs int8")],
                [[r["proj"], r["N"], r["K"], r["bf16_us"], r["bf16_GBps"], r["int8_us"], r["int8_GBps"]]
                 + [v for g in GRIDS for v in (r[f"{g}_us"], r[f"{g}_GBps"], r["bf16_us"] / r[f"{g}_us"],
                                               r["int8_us"] / r[f"{g}_us"])] for r in rows]))
    return rows


SWEEP = [dict(block_n=bn, block_w=bw, num_warps=w) for bn, bw, w in itertools.product((4, 8, 16), (256, 512, 1024), (2, 4, 8))
         if 4 <= bn * bw / (32 * w) <= 32]


@torch.no_grad()
def sweep(shape: str = "Qwen2.5-7B") -> list[dict]:
    "The matrix-vector kernel at M = 1 (g64 asymmetric) over a grid of launch configurations, against its rule."
    from mini_infer.kernels.triton_int4 import int4_gemv, int4_gemv_config
    from mini_infer.kernels.triton_int8 import num_sms
    from mini_infer.quant.int4 import quantize_int4
    rows = []
    for proj, (N, K) in shapes_of(shape).items():
        if proj == "lm_head":
            continue
        x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        q4 = [quantize_int4(torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02, 64, False)]
        copies = max(2, math.ceil(512e6 / int4_bytes(*q4[0])))
        q4 += [tuple(t.clone() for t in q4[0]) for _ in range(copies - 1)]
        run = lambda cfg, r=5: graph_us(lambda i: int4_gemv(x, *q4[i], None, y, **cfg), copies, r)
        rule = int4_gemv_config(1, N, K, num_sms(x.device))
        times = sorted((run(cfg), i) for i, cfg in enumerate(SWEEP))
        best = SWEEP[times[0][1]]
        row = {"proj": proj, "N": N, "K": K, "rule": rule, "rule_us": run(rule, 20), "best": best,
               "best_us": run(best, 20), "top5": [(t, SWEEP[i]) for t, i in times[:5]]}
        rows.append(row)
        print(row, flush=True)
        del q4
        torch.cuda.empty_cache()
    print(f"\n{shape}, M = 1, int4 g64 matrix-vector kernel: launch rule against the best of {len(SWEEP)} configurations")
    print(table(["proj", "N", "K", "rule us", "best us", "rule / best", "best config"],
                [[r["proj"], r["N"], r["K"], r["rule_us"], r["best_us"], r["rule_us"] / r["best_us"], str(r["best"])]
                 for r in rows]))
    return rows


@torch.no_grad()
def thresholds(N: int = 37888, K: int = 3584) -> list[dict]:
    "Rows M from 1 to 2048 on the 7B merged gate/up: bf16 cuBLAS, int8, the int4 kernels, int4 dequantize + cuBLAS."
    from mini_infer.kernels.triton_int4 import triton_dequantize_int4, triton_int4_linear
    from mini_infer.kernels.triton_int8 import triton_int8_linear
    from mini_infer.quant.int4 import quantize_int4
    from mini_infer.quant.int8 import dequantize_int8, quantize_int8
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
    ws, q8s, q4s = [w, w.clone()], [quantize_int8(w) for _ in range(2)], [quantize_int4(w, 64) for _ in range(4)]
    rows = []
    for M in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        row = {"M": M, "bf16_us": graph_us(lambda i: F.linear(x, ws[i]), 2),
               "int8_us": graph_us(lambda i: (triton_int8_linear(x, *q8s[i]) if M <= 512
                                              else F.linear(x, dequantize_int8(*q8s[i], x.dtype))), 2),
               "int4_kernel_us": graph_us(lambda i: triton_int4_linear(x, *q4s[i]), 4),
               "int4_dequant_cublas_us": graph_us(lambda i: F.linear(x, triton_dequantize_int4(*q4s[i], x.dtype)), 4)}
        rows.append(row)
        print(row, flush=True)
    print(f"\n[{N}, {K}] (7B merged gate/up), microseconds per product by rows M (int4: g64 asymmetric)")
    print(table(["M", "bf16 cuBLAS", "int8", "int4 kernel", "int4 dequant + cuBLAS", "kernel / dequant"],
                [[r["M"], r["bf16_us"], r["int8_us"], r["int4_kernel_us"], r["int4_dequant_cublas_us"],
                  r["int4_kernel_us"] / r["int4_dequant_cublas_us"]] for r in rows]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-sweep", action="store_true")
    a = ap.parse_args()
    res = {"env": env(), "copy_bandwidth_GBps": copy_bandwidth()}
    res["check"] = check()
    print("check: every kernel output within one bf16 unit of the float64 result (M <= 64)")
    res["bench"] = bench()
    res["thresholds"] = thresholds()
    if not a.skip_sweep:
        res["sweep"] = sweep()
    save("int4_check", res, a.out)


if __name__ == "__main__":
    main()
