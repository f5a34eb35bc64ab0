"""Batch-1 matrix-vector products of the decode step, per weight shape: cuBLAS (bf16) against Triton matrix-vector
kernels for bf16 and int8 weights, over a grid of tile sizes, as GB/s of weight read.

    python benchmarks/gpu/gemv_sweep.py [--shapes Qwen2.5-7B Qwen2.5-0.5B] [--out DIR]        (H200, ~4 min)

Each timing is one CUDA graph that runs the product over enough copies of the weight (>= 512 MB) that the 50 MB L2
cache cannot hold them, divided by the number of copies: the figure includes the kernel-to-kernel gap of a graph, as
the decode graph has. The Triton candidate (`gemv_kernel` below) streams BLOCK_N rows of the weight per program,
multiplies and adds elementwise into a [BLOCK_N, BLOCK_K] fp32 tile and reduces once; chapter 40a takes the winner.
"""
import argparse
import itertools
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from common import copy_bandwidth, env, save, table


@triton.jit
def gemv_kernel(x_ptr, w_ptr, scale_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                HAS_SCALE: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rn[:, None] * stride_wn + rk[None, :], mask=(rn[:, None] < N) & (rk[None, :] < K),
                    other=0, eviction_policy="evict_first").to(tl.float32)
        x = tl.load(x_ptr + rk, mask=rk < K, other=0.0).to(tl.float32)
        acc += w * x[None, :]
    y = tl.sum(acc, axis=1)
    if HAS_SCALE:
        y = y * tl.load(scale_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=rn < N)


def shapes_of(name: str) -> dict:
    d = {"Qwen2.5-7B": (3584, 18944, 28, 4, 128, 152064), "Qwen2.5-0.5B": (896, 4864, 14, 2, 64, 151936)}[name]
    h, inter, heads, kv, hd, vocab = d
    return {"qkv": (heads * hd + 2 * kv * hd, h), "q": (heads * hd, h), "k": (kv * hd, h), "o": (h, heads * hd),
            "gate_up": (2 * inter, h), "gate": (inter, h), "down": (h, inter), "lm_head": (vocab, h)}


def graph_us(fn, copies: int, repeats: int = 20) -> float:
    "Median microseconds per call of fn(i) for i over the copies, replayed as one CUDA graph."
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(copies):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(copies):
            fn(i)
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / copies)
    del g
    return sorted(ts)[len(ts) // 2]


def configs():
    for bn, bk, w, st in itertools.product((1, 2, 4, 8, 16), (512, 1024, 2048, 4096), (4, 8), (1, 3)):
        per_thread = bn * bk / (32 * w)
        if 4 <= per_thread <= 64:
            yield bn, bk, w, st


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["Qwen2.5-7B", "Qwen2.5-0.5B"])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from mini_infer.kernels.triton_int8 import triton_int8_linear
    from mini_infer.quant.int8 import quantize_int8
    bw = copy_bandwidth()
    res = {"env": env(), "copy_bandwidth_GBps": bw, "rows": []}
    cfgs = list(configs())
    for shape in a.shapes:
        for proj, (N, K) in shapes_of(shape).items():
            nbytes = N * K * 2
            copies = max(2, math.ceil(512e6 / nbytes))
            ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
            x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
            y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
            row = {"shape": shape, "proj": proj, "N": N, "K": K}
            row["cublas_bf16_us"] = graph_us(lambda i: torch.mm(x, ws[i].t(), out=y), copies)
            ref = F.linear(x, ws[0]).float()
            best = None
            for bn, bk, w, st in cfgs:
                run = lambda i: gemv_kernel[(triton.cdiv(N, bn),)](x, ws[i], x, y, N, K, K, BLOCK_N=bn, BLOCK_K=bk,
                                                                   HAS_SCALE=False, num_warps=w, num_stages=st)
                run(0)
                assert torch.allclose(y.float(), ref, atol=2e-2, rtol=2e-2), (bn, bk, w, st)
                t = graph_us(run, copies, 5)
                if best is None or t < best[0]:
                    best = (t, (bn, bk, w, st))
            row["triton_bf16_us"], row["triton_bf16_cfg"] = best[0], best[1]
            bn, bk, w, st = best[1]
            row["triton_bf16_us"] = graph_us(lambda i: gemv_kernel[(triton.cdiv(N, bn),)](
                x, ws[i], x, y, N, K, K, BLOCK_N=bn, BLOCK_K=bk, HAS_SCALE=False, num_warps=w, num_stages=st), copies)
            qs = [quantize_int8(wi) for wi in ws]
            del ws
            qcopies = max(2, math.ceil(512e6 / (N * K)))
            qs = (qs * math.ceil(qcopies / len(qs)))[:qcopies] if len(qs) >= qcopies else qs + [
                quantize_int8(torch.randn(N, K, device="cuda", dtype=torch.bfloat16)) for _ in range(qcopies - len(qs))]
            row["int8_library_us"] = graph_us(lambda i: triton_int8_linear(x, qs[i][0], qs[i][1], out=y), qcopies)
            best = None
            for bn, bk, w, st in cfgs:
                run = lambda i: gemv_kernel[(triton.cdiv(N, bn),)](x, qs[i][0], qs[i][1], y, N, K, K, BLOCK_N=bn,
                                                                   BLOCK_K=bk, HAS_SCALE=True, num_warps=w,
                                                                   num_stages=st)
                t = graph_us(run, qcopies, 5)
                if best is None or t < best[0]:
                    best = (t, (bn, bk, w, st))
            bn, bk, w, st = best[1]
            row["int8_triton_cfg"] = best[1]
            row["int8_triton_us"] = graph_us(lambda i: gemv_kernel[(triton.cdiv(N, bn),)](
                x, qs[i][0], qs[i][1], y, N, K, K, BLOCK_N=bn, BLOCK_K=bk, HAS_SCALE=True, num_warps=w,
                num_stages=st), qcopies)
            del qs
            torch.cuda.empty_cache()
            for key in ("cublas_bf16", "triton_bf16"):
                row[key + "_GBps"] = nbytes / row[key + "_us"] / 1e3
            for key in ("int8_library", "int8_triton"):
                row[key + "_GBps"] = N * K / row[key + "_us"] / 1e3
            res["rows"].append(row)
            print(row, flush=True)
    save("gemv_sweep", res, a.out)
    print(f"\ncopy bandwidth {bw:,.0f} GB/s (read + write)")
    print(table(["shape", "proj", "N", "K", "cuBLAS bf16 us", "GB/s", "Triton bf16 us", "GB/s", "cfg",
                 "int8 lib us", "GB/s", "int8 best us", "GB/s", "cfg"],
                [[r["shape"], r["proj"], r["N"], r["K"], r["cublas_bf16_us"], r["cublas_bf16_GBps"],
                  r["triton_bf16_us"], r["triton_bf16_GBps"], str(r["triton_bf16_cfg"]), r["int8_library_us"],
                  r["int8_library_GBps"], r["int8_triton_us"], r["int8_triton_GBps"], str(r["int8_triton_cfg"])]
                 for r in res["rows"]]))
    print("cfg = (BLOCK_N, BLOCK_K, num_warps, num_stages)")


if __name__ == "__main__":
    main()
