"""Is the int8 one-row matrix-vector kernel short of bytes in flight?

    python benchmarks/gpu/experiments/gemv_inflight.py [--out DIR]                                          (H200, ~3 min)

Chapter 40a's `gemv_kernel` keeps an fp32 accumulator per weight element of its [BLOCK_N, BLOCK_K] tile, so an
int8 tile holds half the bytes of a bf16 tile of the same registers: half the loads in flight. "reduce" sums each
tile over k inside the loop (an accumulator per row), which frees the registers for longer tiles; "reduce+f16"
also converts four weights per register through two fp16 pairs (byte permutes into 0x64xx, an exact fp16x2
subtract, fp16 -> fp32 on the float pipe). Grid of tiles per Qwen2.5-7B int8 shape; timings as in gemv_sweep.py.
"""
import argparse
import itertools
import math
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))          # benchmarks/gpu: common.py
from common import env, save, table
from gemv_sweep import graph_us, shapes_of
from mini_infer.kernels.triton_int8 import INT8X4_TO_FLOAT as F16   # the conversion measured here, now the library's


@triton.jit
def gemv_reduce_kernel(x_ptr, w_ptr, scale_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       CONV: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_wn
    acc = tl.zeros([BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        q = tl.load(w_rows + rk[None, :], mask=(rn[:, None] < N) & (rk[None, :] < K), other=0)
        if CONV == 1:
            w = (q.to(tl.int32) + 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0
        else:
            w = tl.inline_asm_elementwise(F16, "=r,=r,=r,=r,r", [q], dtype=tl.float32, is_pure=True, pack=4)
        x = tl.load(x_ptr + rk, mask=rk < K, other=0.0).to(tl.float32)
        acc += tl.sum(w * x[None, :], axis=1)
    y = acc * tl.load(scale_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=rn < N)


GRID = [g for g in itertools.product((1, 2, 4, 8, 16), (1024, 2048, 4096), (4, 8), (1, 3))
        if 16 <= g[0] * g[1] / (32 * g[2]) <= 128]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from mini_infer.kernels.triton_int8 import gemv
    from mini_infer.quant.int8 import int8_linear_reference, quantize_int8
    res = {"env": env(), "rows": []}
    for proj, (N, K) in shapes_of("Qwen2.5-7B").items():
        copies = max(2, math.ceil(512e6 / (N * K)))
        q0, s0 = quantize_int8(torch.randn(N, K, device="cuda", dtype=torch.bfloat16))
        ws = [(q0, s0)] + [(q0.clone(), s0.clone()) for _ in range(copies - 1)]
        x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        ref = int8_linear_reference(x, q0, s0).float()
        row = {"proj": proj, "N": N, "K": K, "library_us": graph_us(lambda i: gemv(x, *ws[i], None, y), copies)}
        for conv, name in ((1, "reduce"), (2, "reduce+f16")):
            best = None
            for bn, bk, w, st in GRID:
                launch = lambda i: gemv_reduce_kernel[(triton.cdiv(N, bn),)](
                    x, ws[i][0], ws[i][1], y, N, K, K, BLOCK_N=bn, BLOCK_K=bk, CONV=conv, num_warps=w, num_stages=st)
                launch(0)
                err = (y.float() - ref).abs().max().item()
                assert err <= 2e-2 * ref.abs().max().item(), (proj, name, bn, bk, err)
                t = graph_us(launch, copies, 5)
                best = min(best or (t, (bn, bk, w, st)), (t, (bn, bk, w, st)))
            bn, bk, w, st = best[1]
            row[name + "_us"] = graph_us(lambda i: gemv_reduce_kernel[(triton.cdiv(N, bn),)](
                x, ws[i][0], ws[i][1], y, N, K, K, BLOCK_N=bn, BLOCK_K=bk, CONV=conv, num_warps=w, num_stages=st), copies)
            row[name + "_cfg"] = best[1]
        for key in [k for k in row if k.endswith("_us")]:
            row[key.replace("_us", "_TBps")] = N * K / row[key] / 1e6
        res["rows"].append(row)
        print(row, flush=True)
        del ws
        torch.cuda.empty_cache()
    save("gemv_inflight", res, a.out)
    cols = ["library", "reduce", "reduce+f16"]
    print(table(["proj"] + [f"{c} us" for c in cols] + [f"{c} TB/s" for c in cols],
                [[r["proj"]] + [r[f"{c}_us"] for c in cols] + [r[f"{c}_TBps"] for c in cols] for r in res["rows"]]))
    print("best (BLOCK_N, BLOCK_K, warps, stages):", {r["proj"]: (r["reduce_cfg"], r["reduce+f16_cfg"]) for r in res["rows"]})


if __name__ == "__main__":
    main()
