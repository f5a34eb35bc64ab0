"""Benchmark c: prefix caching. A 16k-token shared prompt; time to first token cold (nothing cached) and warm (the
16k prefix cached, only a 32-token suffix computed), Qwen2.5-7B shape in bf16.

    python benchmarks/gpu/prefix_cache.py [--shape Qwen2.5-7B] [--prefix 16384] [--out DIR]   (H200, ~1 min)
"""
import argparse
import random
import time

import torch

from common import config_dir, env, save, table


def main() -> None:
    from mini_infer import LLM, SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="Qwen2.5-7B")
    ap.add_argument("--prefix", type=int, default=16384)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rng = random.Random(0)
    shared = [rng.randint(0, 100000) for _ in range(a.prefix)]
    suffixes = [[rng.randint(0, 100000) for _ in range(32)] for _ in range(6)]
    llm = LLM(config_dir(a.shape), dtype="bfloat16", device="cuda", load_format="dummy", max_model_len=a.prefix + 128,
              max_num_seqs=8, max_num_batched_tokens=8192, gpu_memory_utilization=0.5)
    first = SamplingParams(temperature=0, max_tokens=1)

    def ttft(prompt) -> float:
        torch.cuda.synchronize(); t0 = time.perf_counter()
        llm.generate([prompt], first)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    ttft([1, 2, 3] * 700)                                                   # warm-up: kernels, graphs
    cold = [ttft([rng.randint(0, 100000)] + shared[1:] + suffixes[0])]      # another first token: nothing cached
    bm = llm.engine.block_manager
    hits0 = bm.num_hit_tokens
    cold.append(ttft(shared + suffixes[1]))                                 # cold: caches the prefix
    warm = [ttft(shared + s) for s in suffixes[2:]]
    res = {"env": env(), "shape": a.shape, "dtype": "bfloat16", "prefix_tokens": a.prefix, "suffix_tokens": 32,
           "max_num_batched_tokens": 8192, "ttft_cold_s": cold, "ttft_warm_s": warm,
           "hit_tokens": bm.num_hit_tokens - hits0}
    res["speedup"] = min(cold) / (sorted(warm)[len(warm) // 2])
    save("prefix_cache", res, a.out)
    print(table(["", "TTFT (s)"], [["cold (best of 2)", min(cold)], ["warm (median of 4)", sorted(warm)[len(warm) // 2]]]))
    print(f"warm is {res['speedup']:.1f}x faster; {res['hit_tokens']} prompt tokens came from the cache")


if __name__ == "__main__":
    main()
