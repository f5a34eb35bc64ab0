"""Batch-1 matrix-vector products of the decode step, per weight shape: cuBLAS (bf16) against chapter 40a's
matrix-vector kernel (`gemv`) for bf16 and int8 weights, with its launch rule (`gemv_config`) and with the best of
a grid of tile sizes, as GB/s of weight read.

    python benchmarks/gpu/gemv_sweep.py [--shapes Qwen2.5-7B Qwen2.5-0.5B] [--out DIR]        (H200, ~3 min)

Each timing is one CUDA graph that runs the product over enough copies of the weight (>= 512 MB) that the 50 MB L2
cache cannot hold them, divided by the number of copies: the figure includes the kernel-to-kernel gap of a graph, as
the decode graph has. "rule" is what the engine runs; "best" says how much a better rule could gain.
"""
import argparse
import itertools
import math

import torch

from common import copy_bandwidth, env, save, table


def shapes_of(name: str) -> dict:
    h, inter, heads, kv, hd, vocab = {"Qwen2.5-7B": (3584, 18944, 28, 4, 128, 152064),
                                      "Qwen2.5-0.5B": (896, 4864, 14, 2, 64, 151936)}[name]
    return {"qkv": (heads * hd + 2 * kv * hd, h), "o": (h, heads * hd), "gate_up": (2 * inter, h),
            "down": (h, inter), "lm_head": (vocab, h)}


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


GRID = [dict(block_n=bn, block_k=bk, num_warps=w, num_stages=st)
        for bn, bk, w, st in itertools.product((1, 2, 4, 8, 16), (512, 1024, 2048, 4096), (4, 8), (1, 3))
        if 4 <= bn * bk / (32 * w) <= 64]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["Qwen2.5-7B", "Qwen2.5-0.5B"])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from mini_infer.kernels.triton_int8 import gemv, gemv_config, num_sms
    from mini_infer.quant.int8 import quantize_int8
    bw = copy_bandwidth()
    res = {"env": env(), "copy_bandwidth_GBps": bw, "rows": []}
    for shape in a.shapes:
        for proj, (N, K) in shapes_of(shape).items():
            x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
            y = torch.empty(1, N, device="cuda", dtype=torch.bfloat16)
            row = {"shape": shape, "proj": proj, "N": N, "K": K}
            for kind in ("bf16", "int8"):
                nbytes = N * K * (2 if kind == "bf16" else 1)
                copies = max(2, math.ceil(512e6 / nbytes))
                w0 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
                ws = [(w0, None) if kind == "bf16" else quantize_int8(w0)]
                ws += [(ws[0][0].clone(), None if ws[0][1] is None else ws[0][1].clone()) for _ in range(copies - 1)]
                del w0
                if kind == "bf16":
                    row["cublas_us"] = graph_us(lambda i: torch.mm(x, ws[i][0].t(), out=y), copies)
                run = lambda cfg: graph_us(lambda i: gemv(x, ws[i][0], ws[i][1], None, y, **cfg), copies, 5)
                best = min((run(cfg), i) for i, cfg in enumerate(GRID))
                row[f"{kind}_best_cfg"] = GRID[best[1]]
                row[f"{kind}_best_us"] = graph_us(lambda i: gemv(x, ws[i][0], ws[i][1], None, y, **GRID[best[1]]), copies)
                row[f"{kind}_rule_cfg"] = gemv_config(1, N, K, kind == "int8", num_sms(x.device))
                row[f"{kind}_rule_us"] = graph_us(lambda i: gemv(x, ws[i][0], ws[i][1], None, y), copies)
                row[f"{kind}_rule_GBps"] = nbytes / row[f"{kind}_rule_us"] / 1e3
                if kind == "bf16":
                    row["cublas_GBps"] = nbytes / row["cublas_us"] / 1e3
                del ws
                torch.cuda.empty_cache()
            res["rows"].append(row)
            print(row, flush=True)
    save("gemv_sweep", res, a.out)
    print(f"\ncopy bandwidth {bw:,.0f} GB/s (read + write); one row (M = 1), microseconds per product")
    print(table(["shape", "proj", "N", "K", "cuBLAS bf16", "GB/s", "gemv bf16 rule", "best", "GB/s (rule)",
                 "int8 rule", "best", "GB/s (rule)", "int8 vs cuBLAS"],
                [[r["shape"], r["proj"], r["N"], r["K"], r["cublas_us"], r["cublas_GBps"], r["bf16_rule_us"],
                  r["bf16_best_us"], r["bf16_rule_GBps"], r["int8_rule_us"], r["int8_best_us"], r["int8_rule_GBps"],
                  r["cublas_us"] / r["int8_rule_us"]] for r in res["rows"]]))
    for r in res["rows"]:
        print(f"{r['shape']:13s} {r['proj']:8s} best bf16 {r['bf16_best_cfg']}  best int8 {r['int8_best_cfg']}")


if __name__ == "__main__":
    main()
