"""Which int8 -> fp32 conversion lets a batch-1 int8 matrix-vector product stream fastest on the H200?

    python benchmarks/gpu/experiments/int8_convert_variants.py [--out DIR]                                  (H200, ~1 min)

Three conversions inside the same one-row kernel (chapter 40a's `gemv_kernel`, M = 1 path), each over a grid of
tiles, on the Qwen2.5-7B int8 shapes: "i2f" the plain conversion (the integer-to-float unit, 16 per clock per
multiprocessor on Hopper), "exponent" chapter 40a's (sign-extend, integer add into the exponent field, float
subtract), "prmt" four weights per 32-bit register placed into four float mantissas by byte permutes (inline PTX).
Timings as in gemv_sweep.py (one CUDA graph over >= 512 MB of weight copies).
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
from gemv_sweep import graph_us

PRMT = tl.constexpr("""{
.reg .b32 t, m;
mov.b32 m, 0x4B000000;
xor.b32 t, $4, 0x80808080;
prmt.b32 $0, t, m, 0x7540;
prmt.b32 $1, t, m, 0x7541;
prmt.b32 $2, t, m, 0x7542;
prmt.b32 $3, t, m, 0x7543;
}""")


@triton.jit
def gemv1_kernel(x_ptr, w_ptr, scale_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 CONV: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_wn
    acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        q = tl.load(w_rows + rk[None, :], mask=(rn[:, None] < N) & (rk[None, :] < K), other=0)
        if CONV == 0:
            w = q.to(tl.float32)
        elif CONV == 1:
            w = (q.to(tl.int32) + 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0
        else:
            w = tl.inline_asm_elementwise(PRMT, "=r,=r,=r,=r,r", [q], dtype=tl.float32, is_pure=True,
                                          pack=4) - 8388736.0
        x = tl.load(x_ptr + rk, mask=rk < K, other=0.0).to(tl.float32)
        acc += w * x[None, :]
    y = tl.sum(acc, axis=1) * tl.load(scale_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=rn < N)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from mini_infer.quant.int8 import int8_linear_reference, quantize_int8
    shapes = {"qkv": (4608, 3584), "o": (3584, 3584), "gate_up": (37888, 3584), "down": (3584, 18944)}
    grid = list(itertools.product((2, 4, 8, 16), (512, 1024, 2048), (4, 8), (1, 3)))
    grid = [g for g in grid if 4 <= g[0] * g[1] / (32 * g[2]) <= 64]
    res = {"env": env(), "rows": []}
    for proj, (N, K) in shapes.items():
        copies = max(2, math.ceil(512e6 / (N * K)))
        q0, s0 = quantize_int8(torch.randn(N, K, device="cuda", dtype=torch.bfloat16))
        qs = [(q0, s0)] + [(q0.clone(), s0.clone()) for _ in range(copies - 1)]
        x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
        ref = int8_linear_reference(x, q0, s0).float()
        row = {"proj": proj, "N": N, "K": K}
        for conv, name in enumerate(("i2f", "exponent", "prmt")):
            best = None
            for bn, bk, w, st in grid:
                launch = lambda i: gemv1_kernel[(triton.cdiv(N, bn),)](x, qs[i][0], qs[i][1], y, N, K, K, BLOCK_N=bn,
                                                                       BLOCK_K=bk, CONV=conv, num_warps=w, num_stages=st)
                launch(0)
                assert torch.allclose(y.float(), ref, rtol=2 ** -7, atol=1e-3), (name, bn, bk)
                t = graph_us(launch, copies, 5)
                best = min(best or (t, (bn, bk, w, st)), (t, (bn, bk, w, st)))
            row[name + "_us"], row[name + "_cfg"] = best
            row[name + "_GBps"] = N * K / best[0] / 1e3
        res["rows"].append(row)
        print(row, flush=True)
        del qs
        torch.cuda.empty_cache()
    save("int8_convert_variants", res, a.out)
    print(table(["proj", "N", "K"] + [f"{n} {u}" for n in ("i2f", "exponent", "prmt") for u in ("us", "GB/s")],
                [[r["proj"], r["N"], r["K"]] + [r[f"{n}_{u}"] for n in ("i2f", "exponent", "prmt") for u in ("us", "GBps")]
                 for r in res["rows"]]))
    print("best (BLOCK_N, BLOCK_K, warps, stages):", {r["proj"]: (r["i2f_cfg"], r["exponent_cfg"], r["prmt_cfg"]) for r in res["rows"]})


if __name__ == "__main__":
    main()
