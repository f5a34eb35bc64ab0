"""Weight quantization quality on real weights (SmolLM2-135M-Instruct, the bundled Q4_1 GGUF, CPU): for each
`quantization`, against the model with chapter 03's fp32 dequantization of the file ("fp32"), the measures of
kv_quality.py (same prompts and texts): greedy agreement over 32 prompts x 64 tokens (first divergence), mean
cosine of the logits over the first 1024 tokens of Debian's GPL-3 text, and perplexity on it; plus the weight
bytes the engine holds.

The "unquantized" model here is the file's own Q4_1 weights in fp32 (no other SmolLM2 weights ship offline), so
`int4_g32` (min-max, group 32: the Q4_1 grid) re-quantizes a grid it already lies on, and `gguf` computes with
the file's blocks themselves: both differ from fp32 only by the products' rounding (bf16 in PyTorch's CPU int4
kernel). `int4_g128` is refused on SmolLM2 (128 does not divide d = 576).

    python benchmarks/weight_quality.py [--methods none,int8,int4_g32,int4,int4_sym_g32,int4_sym,gguf]  (~10 min)
"""
import argparse
import hashlib

import torch

from common import print_table, save_run, setup
from kv_quality import PPL_TEXT, PROMPT_TEXT, measure, quality, texts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default="none,int8,int4_g32,int4,int4_sym_g32,int4_sym,gguf")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--text-tokens", type=int, default=1024)
    ap.add_argument("--no-save", action="store_true", help="a smoke test: print, record nothing")
    a = ap.parse_args()
    env = setup()
    torch.set_num_threads(1)
    text_ids, prompts = texts(a.num_prompts, a.text_tokens)
    run_of = lambda method: measure("auto", prompts, text_ids, a.max_tokens,
                                    quantization=None if method == "none" else method)
    ref = run_of("none")
    rows, results = [], {}
    for method in a.methods.split(","):
        m = ref if method == "none" else run_of(method)
        r = {"weight_bytes": m["weight_bytes"], **quality(ref, m, text_ids, a.max_tokens)}
        results[method] = r
        rows.append([method, f"{r['weight_bytes'] / 2**20:.1f}", f"{r['weight_bytes'] / ref['weight_bytes']:.3f}",
                     f"{r['prefix16_identical']:.0%}", f"{r['all_identical']:.0%}",
                     f"{r['mean_first_divergence']:.1f}", f"{r['logit_cosine']:.5f}", f"{r['perplexity']:.3f}"])
        print(rows[-1], flush=True)
    run = {"env": env, "model": "SmolLM2-135M-Instruct Q4_1 GGUF", "num_prompts": a.num_prompts,
           "max_tokens": a.max_tokens, "prompt_text": str(PROMPT_TEXT), "ppl_text": str(PPL_TEXT),
           "ppl_text_sha256": hashlib.sha256(PPL_TEXT.read_bytes()).hexdigest(), "text_tokens": len(text_ids),
           "results": results}
    if not a.no_save:
        print(save_run("weight_quality", run))
    print_table(["quantization", "weights MiB", "vs fp32", "16-prefix same", "64 same", "mean 1st diff",
                 "logit cos", "ppl"], rows)


if __name__ == "__main__":
    main()
