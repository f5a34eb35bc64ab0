"""Does the one-row matrix-vector kernel stream faster when x is loaded in the weight tile's own layout?

    python benchmarks/gpu/experiments/gemv_variants.py [--out DIR]                                          (H200, ~4 min)

Chapter 40a's `gemv_kernel` loads x [BLOCK_K] as a 1-D tensor and broadcasts it over the [BLOCK_N, BLOCK_K] weight
tile; Triton converts its layout through shared memory with three barriers per iteration of the K loop (read in
the SASS: `STSM`, `BAR.SYNC`, `LDS`). "bcast" loads x through a [BLOCK_N, BLOCK_K] pointer tensor that is constant
along the rows, so the load takes the tile's layout and the loop has no barrier; "bcast+prmt" adds the byte-permute
int8 conversion of int8_convert_variants.py. Every variant over a grid of tiles, on the Qwen2.5-7B one-row shapes;
timings as in gemv_sweep.py (one CUDA graph over >= 512 MB of weight copies).
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
from int8_convert_variants import PRMT


@triton.jit
def gemv_bcast_kernel(x_ptr, w_ptr, scale_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      CONV: tl.constexpr):
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * stride_wn
    x_rows = x_ptr + 0 * rn[:, None]                                   # [BLOCK_N, 1], every row the same x
    acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        mask = (rn[:, None] < N) & (rk[None, :] < K)
        q = tl.load(w_rows + rk[None, :], mask=mask, other=0)
        if CONV == 0:                                                  # float weights
            w = q.to(tl.float32)
        elif CONV == 1:                                                # chapter 40a's exponent conversion
            w = (q.to(tl.int32) + 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0
        else:                                                          # byte permutes, four per register
            w = tl.inline_asm_elementwise(PRMT, "=r,=r,=r,=r,r", [q], dtype=tl.float32, is_pure=True,
                                          pack=4) - 8388736.0
        x = tl.load(x_rows + rk[None, :], mask=mask, other=0.0).to(tl.float32)
        acc += w * x
    y = tl.sum(acc, axis=1)
    if CONV != 0:
        y = y * tl.load(scale_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    tl.store(y_ptr + rn, y.to(y_ptr.dtype.element_ty), mask=rn < N)


GRID = [g for g in itertools.product((2, 4, 8, 16), (512, 1024, 2048), (4, 8), (1, 3))
        if 16 <= g[0] * g[1] / (32 * g[2]) <= 64]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from mini_infer.kernels.triton_int8 import gemv
    from mini_infer.quant.int8 import int8_linear_reference, quantize_int8
    res = {"env": env(), "rows": []}
    for proj, (N, K) in shapes_of("Qwen2.5-7B").items():
        for kind in ("bf16", "int8"):
            nbytes = N * K * (2 if kind == "bf16" else 1)
            copies = max(2, math.ceil(512e6 / nbytes))
            w0 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
            ws = [(w0, torch.ones(N, device="cuda", dtype=torch.bfloat16)) if kind == "bf16" else quantize_int8(w0)]
            ws += [(ws[0][0].clone(), ws[0][1].clone()) for _ in range(copies - 1)]
            x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
            y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
            ref = (x.float() @ w0.float().t() if kind == "bf16" else int8_linear_reference(x, *ws[0]).float())
            del w0
            row = {"proj": proj, "N": N, "K": K, "weights": kind}
            if kind == "bf16":
                row["cublas_us"] = graph_us(lambda i: torch.mm(x, ws[i][0].t(), out=y), copies)
            row["library_us"] = graph_us(lambda i: gemv(x, ws[i][0], None if kind == "bf16" else ws[i][1], None, y),
                                         copies)
            for conv, name in ((0, "bcast"),) if kind == "bf16" else ((1, "bcast"), (2, "bcast+prmt")):
                best = None
                for bn, bk, w, st in GRID:
                    launch = lambda i: gemv_bcast_kernel[(triton.cdiv(N, bn),)](
                        x, ws[i][0], ws[i][1], y, N, K, K, BLOCK_N=bn, BLOCK_K=bk, CONV=conv, num_warps=w,
                        num_stages=st)
                    launch(0)
                    err = (y.float() - ref).abs().max().item()
                    assert err <= 2e-2 * ref.abs().max().item(), (proj, kind, name, bn, bk, err)
                    t = graph_us(launch, copies, 5)
                    best = min(best or (t, (bn, bk, w, st)), (t, (bn, bk, w, st)))
                row[name + "_us"], row[name + "_cfg"] = graph_us(lambda i: gemv_bcast_kernel[(triton.cdiv(N, best[1][0]),)](
                    x, ws[i][0], ws[i][1], y, N, K, K, BLOCK_N=best[1][0], BLOCK_K=best[1][1], CONV=conv,
                    num_warps=best[1][2], num_stages=best[1][3]), copies), best[1]
            for key in [k for k in row if k.endswith("_us")]:
                row[key.replace("_us", "_TBps")] = nbytes / row[key] / 1e6
            res["rows"].append(row)
            print(row, flush=True)
            del ws
            torch.cuda.empty_cache()
    save("gemv_variants", res, a.out)
    cols = ["cublas", "library", "bcast", "bcast+prmt"]
    print(table(["proj", "weights"] + [f"{c} us" for c in cols] + [f"{c} TB/s" for c in cols],
                [[r["proj"], r["weights"]] + [r.get(f"{c}_us", "") for c in cols] + [r.get(f"{c}_TBps", "") for c in cols]
                 for r in res["rows"]]))
    print("best (BLOCK_N, BLOCK_K, warps, stages):", {(r["proj"], r["weights"]): (r.get("bcast_cfg"), r.get("bcast+prmt_cfg"))
                                                      for r in res["rows"]})


if __name__ == "__main__":
    main()
