"""Benchmark b: the nano-vllm workload. Qwen3-0.6B shape, bf16, 256 requests, prompt and output lengths uniform in
[100, 1024], random prompt tokens, ignore_eos, seed 0 (nano-vllm's bench.py). Output tokens/s of mini_infer and of
HF transformers `generate` over the same requests (padded batches of --hf-batch, greedy, same weights).
--kv-cache-dtype auto,fp8,... runs mini_infer once per KV dtype in the same process (chapters 42-43a), each against
the first in the list: `kv_runs` in the result, with tokens/s and the ratio to the first dtype.

    python benchmarks/gpu/throughput.py [--num-requests 256] [--hf-batch 128] [--skip-hf] [--out DIR]   (H200, ~3 min)
    python benchmarks/gpu/throughput.py --skip-hf --kv-cache-dtype auto,fp8,turbo4,turbo3
"""
import argparse
import random
import time

import torch

from common import config_dir, env, free_cuda, hf_twin, save, table


def workload(num: int, max_in: int = 1024, max_out: int = 1024, seed: int = 0):
    "nano-vllm's requests: token ids in [0, 10000], lengths uniform in [100, max]."
    rng = random.Random(seed)
    prompts = [[rng.randint(0, 10000) for _ in range(rng.randint(100, max_in))] for _ in range(num)]
    outs = [rng.randint(100, max_out) for _ in range(num)]
    return prompts, outs


def hf_generate(hf, prompts, outs, batch: int) -> float:
    "Seconds for HF generate over all requests, `batch` at a time, left-padded; each batch runs to its longest output."
    t0 = time.perf_counter()
    for s in range(0, len(prompts), batch):
        ps, os_ = prompts[s:s + batch], outs[s:s + batch]
        width = max(map(len, ps))
        ids = torch.tensor([[0] * (width - len(p)) + p for p in ps], device="cuda")
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in ps], device="cuda")
        with torch.no_grad():
            hf.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=max(os_), min_new_tokens=max(os_),
                        pad_token_id=0)
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    from mini_infer import LLM, SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-requests", type=int, default=256)
    ap.add_argument("--hf-batch", type=int, default=128)
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--kv-cache-dtype", default="auto", help="comma-separated; the first is the baseline")
    a = ap.parse_args()
    prompts, outs = workload(a.num_requests)
    total_out = sum(outs)
    res = {"env": env(), "shape": "Qwen3-0.6B", "dtype": "bfloat16", "num_requests": a.num_requests,
           "prompt_tokens": sum(map(len, prompts)), "output_tokens": total_out}
    params = [SamplingParams(temperature=0, max_tokens=o, ignore_eos=True) for o in outs]
    res["kv_runs"] = []
    for i, kv in enumerate(a.kv_cache_dtype.split(",")):
        if i:
            del llm
            free_cuda()
        t0 = time.perf_counter()
        llm = LLM(config_dir("Qwen3-0.6B"), dtype="bfloat16", device="cuda", load_format="dummy",
                  max_model_len=2048, max_num_seqs=256, max_num_batched_tokens=16384, gpu_memory_utilization=0.5,
                  kv_cache_dtype=kv)
        run = {"kv_cache_dtype": kv, "startup_s": time.perf_counter() - t0,
               "graph_memory_MiB": getattr(llm.engine.runner, "graph_memory_bytes", 0) / 2**20}
        llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4))                   # warm-up
        torch.cuda.synchronize(); t0 = time.perf_counter()
        got = llm.generate(prompts, params)
        torch.cuda.synchronize(); run["s"] = time.perf_counter() - t0
        assert [len(o.outputs[0].token_ids) for o in got] == outs
        run.update(tok_s=total_out / run["s"], steps=llm.engine.counters["steps"],
                   num_preemptions=llm.engine.scheduler.num_preemptions)
        run["vs_first"] = run["tok_s"] / res["kv_runs"][0]["tok_s"] if res["kv_runs"] else 1.0
        res["kv_runs"].append(run)
        print(run, flush=True)
    first = res["kv_runs"][0]
    res.update(startup_s=first["startup_s"], graph_memory_MiB=first["graph_memory_MiB"], mini_infer_s=first["s"],
               mini_infer_tok_s=first["tok_s"], mini_infer_steps=first["steps"],
               num_preemptions=first["num_preemptions"], kv_cache_dtype=first["kv_cache_dtype"])
    if not a.skip_hf:
        hf = hf_twin(llm, "Qwen3-0.6B", torch.bfloat16)
        del llm
        free_cuda()
        hf_generate(hf, prompts[:2], [4, 4], 2)                                              # warm-up
        res["hf_batch"] = a.hf_batch
        res["hf_s"] = hf_generate(hf, prompts, outs, a.hf_batch)
        res["hf_tok_s"] = total_out / res["hf_s"]
        res["ratio"] = res["mini_infer_tok_s"] / res["hf_tok_s"]
    save("throughput", res, a.out)
    print(table(["system", "seconds", "output tok/s"],
                [[f"mini_infer, KV {r['kv_cache_dtype']}", r["s"], r["tok_s"]] for r in res["kv_runs"]]
                + ([[f"HF generate (batches of {a.hf_batch})", res["hf_s"], res["hf_tok_s"]]] if "hf_s" in res else [])))
    if "ratio" in res:
        print(f"ratio mini_infer / HF: {res['ratio']:.2f}x over {a.num_requests} requests, {total_out} output tokens")


if __name__ == "__main__":
    main()
