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

import torch

from common import setup
from kv_quality import add_text_arguments, measure, quality, quality_cells, record, texts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", default="none,int8,int4_g32,int4,int4_sym_g32,int4_sym,gguf")
    add_text_arguments(ap)
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
                     *quality_cells(r)])
        print(rows[-1], flush=True)
    record("weight_quality", "SmolLM2-135M-Instruct Q4_1 GGUF", env, a, text_ids, results,
           ["quantization", "weights MiB", "vs fp32"], rows)

if __name__ == "__main__":
    main()
