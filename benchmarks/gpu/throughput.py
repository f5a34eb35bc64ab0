"""Benchmark b: the nano-vllm workload. Qwen3-0.6B shape, bf16, 256 requests, prompt and output lengths uniform in
[100, 1024], random prompt tokens, ignore_eos, seed 0 (nano-vllm's bench.py). Output tokens/s of mini_infer and of
HF transformers `generate` over the same requests (padded batches of --hf-batch, greedy, same weights).

    python benchmarks/gpu/throughput.py [--num-requests 256] [--hf-batch 128] [--skip-hf] [--out DIR]   (H200, ~3 min)
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
    a = ap.parse_args()
    prompts, outs = workload(a.num_requests)
    total_out = sum(outs)
    res = {"env": env(), "shape": "Qwen3-0.6B", "dtype": "bfloat16", "num_requests": a.num_requests,
           "prompt_tokens": sum(map(len, prompts)), "output_tokens": total_out}
    t0 = time.perf_counter()
    llm = LLM(config_dir("Qwen3-0.6B"), dtype="bfloat16", device="cuda", load_format="dummy", max_model_len=2048,
              max_num_seqs=256, max_num_batched_tokens=16384, gpu_memory_utilization=0.5)
    res["startup_s"] = time.perf_counter() - t0
    res["graph_memory_MiB"] = getattr(llm.engine.runner, "graph_memory_bytes", 0) / 2**20
    llm.generate([[1, 2, 3]], SamplingParams(temperature=0, max_tokens=4))                   # warm-up
    params = [SamplingParams(temperature=0, max_tokens=o, ignore_eos=True) for o in outs]
    torch.cuda.synchronize(); t0 = time.perf_counter()
    got = llm.generate(prompts, params)
    torch.cuda.synchronize(); res["mini_infer_s"] = time.perf_counter() - t0
    assert [len(o.outputs[0].token_ids) for o in got] == outs
    res["mini_infer_tok_s"] = total_out / res["mini_infer_s"]
    res["mini_infer_steps"] = llm.engine.counters["steps"]
    res["num_preemptions"] = llm.engine.scheduler.num_preemptions
    print({k: v for k, v in res.items() if k != "env"}, flush=True)
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
                [["mini_infer", res["mini_infer_s"], res["mini_infer_tok_s"]]]
                + ([[f"HF generate (batches of {a.hf_batch})", res["hf_s"], res["hf_tok_s"]]] if "hf_s" in res else [])))
    if "ratio" in res:
        print(f"ratio mini_infer / HF: {res['ratio']:.2f}x over {a.num_requests} requests, {total_out} output tokens")


if __name__ == "__main__":
    main()
