"""Time to first token with a 2,000-token shared prefix: cold vs warm prefix cache, a control without it, and transformers.

Run: .venv/bin/python benchmarks/cpu_prefix_cache.py [--prefix-tokens 2000 --suffix-tokens 16 --repeats 3]
"""
import argparse
import contextlib
import io
import statistics
import time

import torch

from common import NUM_THREADS, cpu_share, noise_line, print_table, save_run, setup
from cpu_throughput import NUM_SPECIAL_IDS
from mini_infer import LLM, SamplingParams
from mini_infer.cli import hf_peer


def ttft(llm: LLM, ids: list[int]) -> float:
    "Wall seconds of a `generate` of one token (prefill plus the first sample)."
    t = time.perf_counter()
    llm.generate([ids], SamplingParams(temperature=0, max_tokens=1))
    return time.perf_counter() - t


@torch.no_grad()
def hf_ttft(hf, ids: list[int]) -> float:
    "Wall seconds of transformers' `generate` of one token."
    x = torch.tensor([ids])
    t = time.perf_counter()
    hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=1, pad_token_id=0)
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prefix-tokens", type=int, default=2000)
    p.add_argument("--suffix-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="fresh random prefixes; medians are reported")
    a = p.parse_args()
    env = setup()
    with contextlib.redirect_stderr(io.StringIO()):
        on = LLM(enable_prefix_caching=True)
        off = LLM(enable_prefix_caching=False)
        hf = hf_peer(None, torch.float32, "cpu")
    g = torch.Generator().manual_seed(0)
    rand = lambda n: torch.randint(NUM_SPECIAL_IDS, on.config.vocab_size, (n,), generator=g).tolist()
    warmup = rand(64)
    ttft(on, warmup), ttft(off, warmup), hf_ttft(hf, warmup)
    t = {k: [] for k in ("cold", "warm", "off_first", "off_second", "hf_first", "hf_second")}
    for _ in range(a.repeats):
        prefix = rand(a.prefix_tokens)
        first, second = prefix + rand(a.suffix_tokens), prefix + rand(a.suffix_tokens)
        t["cold"].append(ttft(on, first)), t["warm"].append(ttft(on, second))
        t["off_first"].append(ttft(off, first)), t["off_second"].append(ttft(off, second))
        t["hf_first"].append(hf_ttft(hf, first)), t["hf_second"].append(hf_ttft(hf, second))
    med = {k: statistics.median(v) for k, v in t.items()}
    st, st_off = on.engine.stats(), off.engine.stats()
    n = a.prefix_tokens + a.suffix_tokens
    print(f"environment: {env} (torch.set_num_threads({NUM_THREADS}))")
    print(f"workload   : SmolLM2 fp32, prompt = {a.prefix_tokens} shared random ids + {a.suffix_tokens} distinct ones "
          f"({n} tokens), max_tokens=1, a fresh prefix per repeat, median of {a.repeats}\n")
    print_table(["engine", "1st request TTFT s", "2nd request TTFT s", "1st / 2nd"],
                [["mini_infer, prefix caching", med["cold"], med["warm"], med["cold"] / med["warm"]],
                 ["mini_infer, no prefix caching", med["off_first"], med["off_second"],
                  med["off_first"] / med["off_second"]],
                 ["transformers (no cross-request cache)", med["hf_first"], med["hf_second"],
                  med["hf_first"] / med["hf_second"]]])
    print(f"\nwarm mini_infer vs transformers on the 2nd request: {med['hf_second'] / med['warm']:.1f}x; cold: "
          f"{med['hf_first'] / med['cold']:.2f}x")
    print(f"prefix cache (all requests, warm-up included): {st['prefix_cache_hits']:,} of "
          f"{st['prefix_cache_queries']:,} queried tokens hit; control: {st_off['prefix_cache_hits']} hits")
    share = cpu_share()
    print(noise_line(share))
    path = save_run("prefix_cache", {
        "env": env, "threads": NUM_THREADS, **share, "prefix_tokens": a.prefix_tokens, "suffix_tokens": a.suffix_tokens,
        "repeats": a.repeats, "times_s": t, "median_s": med, "ratio_cold_warm": med["cold"] / med["warm"],
        "ratio_off": med["off_first"] / med["off_second"], "ratio_hf_warm": med["hf_second"] / med["warm"],
        "prefix_cache_hits": st["prefix_cache_hits"], "prefix_cache_queries": st["prefix_cache_queries"],
        "control_hits": st_off["prefix_cache_hits"]})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
