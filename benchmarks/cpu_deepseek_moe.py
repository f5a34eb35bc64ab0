"""A small DeepSeek-V3-shaped random model (4 layers, 64 routed experts, top-8, MLA) on the CPU: 16 concurrent requests,
mini_infer's batched paged engine against transformers `generate` over the same 16 requests (one left-padded batch).

Usage: python benchmarks/cpu_deepseek_moe.py [--threads N]   (default 2; prints a table, appends to
benchmarks/results/cpu-2core_deepseek_moe_<date>.json). On a shared machine one thread is the steadier figure: a
multi-threaded operation waits for a busy second core at every barrier, on both sides.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from common import cpu_share, noise_line, print_table, save_run, setup  # noqa: E402

CONFIG = dict(num_hidden_layers=4, hidden_size=256, intermediate_size=512, num_attention_heads=8,
              num_key_value_heads=8, vocab_size=4096, max_position_embeddings=1024, q_lora_rank=96, kv_lora_rank=64,
              qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, n_routed_experts=64, num_experts_per_tok=8,
              moe_intermediate_size=128, n_shared_experts=1, first_k_dense_replace=1, n_group=8, topk_group=4)
NUM_REQUESTS, PROMPT_LEN, OUTPUT_LEN = 16, 64, 64


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=common.NUM_THREADS)
    common.NUM_THREADS = ap.parse_args().threads                  # setup() and cpu_share() read it
    env = setup()
    from mini_infer import LLM, SamplingParams
    from mini_infer.oracle import hf_tiny_model, save_tiny
    from mini_infer.testing import tiny_config
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, CONFIG["vocab_size"], (PROMPT_LEN,), generator=g).tolist() for _ in range(NUM_REQUESTS)]
    hf = hf_tiny_model(tiny_config("deepseek_v3", **CONFIG))
    with tempfile.TemporaryDirectory() as d:
        llm = LLM(save_tiny(hf, d))
    params = SamplingParams(temperature=0, max_tokens=OUTPUT_LEN, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))       # warm-up
    t, c = time.perf_counter(), time.process_time()
    outs = llm.generate(prompts, params)
    ours_s, ours_cpu = time.perf_counter() - t, time.process_time() - c
    x = torch.tensor(prompts)                                       # equal lengths: no padding needed
    with torch.no_grad():
        hf.generate(x[:2], attention_mask=torch.ones_like(x[:2]), do_sample=False, max_new_tokens=4, pad_token_id=0)
        t, c = time.perf_counter(), time.process_time()
        ref = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=OUTPUT_LEN,
                          min_new_tokens=OUTPUT_LEN, pad_token_id=0)
        hf_s, hf_cpu = time.perf_counter() - t, time.process_time() - c
    same = sum(o.outputs[0].token_ids == ref[i, PROMPT_LEN:].tolist() for i, o in enumerate(outs))
    total = NUM_REQUESTS * OUTPUT_LEN
    run = {"env": env, "threads": common.NUM_THREADS, "config": CONFIG, "num_requests": NUM_REQUESTS, "prompt_len": PROMPT_LEN,
           "output_len": OUTPUT_LEN, "mini_infer_s": ours_s, "hf_s": hf_s, "mini_infer_tok_s": total / ours_s,
           "hf_tok_s": total / hf_s, "ratio": hf_s / ours_s, "identical_outputs": same,
           "mini_infer_cpu_s": ours_cpu, "hf_cpu_s": hf_cpu, "cpu_time_ratio": hf_cpu / ours_cpu,
           "hf_experts_implementation": getattr(hf.config, "_experts_implementation", "default"), **cpu_share()}
    print(env)
    print_table(["engine", "seconds", "CPU seconds", "output tok/s"],
                [["mini_infer", ours_s, ours_cpu, total / ours_s],
                 ["transformers generate", hf_s, hf_cpu, total / hf_s]])
    print(f"ratio {hf_s / ours_s:.2f}x (by CPU time {hf_cpu / ours_cpu:.2f}x, the steadier figure on a shared "
          f"machine); {same}/{NUM_REQUESTS} greedy outputs identical to transformers")
    print(noise_line(run))
    print("wrote", save_run("deepseek_moe", run))


if __name__ == "__main__":
    main()
