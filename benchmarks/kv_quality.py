"""KV cache quantization quality on real weights (SmolLM2-135M-Instruct, the bundled GGUF, fp32, CPU): for each
kv_cache_dtype, against the unquantized cache ("auto") of the same weights:
  - greedy agreement over 32 prompts x 64 tokens, one batched engine run per dtype (first divergence position,
    share of identical 16-token prefixes, share of identical 64-token continuations);
  - mean cosine of the next-token logits and perplexity over a fixed English text that ships offline
    (Debian's /usr/share/common-licenses/GPL-3, first 1024 tokens, teacher-forced, one forward through the cache);
  - KV bytes per token (every layer, scales and norms included).
Prompts: 32 windows of 32 tokens of /usr/share/common-licenses/Apache-2.0 (another text than the perplexity one).

    python benchmarks/kv_quality.py [--dtypes auto,fp8,turbo4,...] [--num-prompts 32] [--max-tokens 64]   (~10 min)
"""
import argparse
import hashlib
import math
from pathlib import Path

import torch

from common import print_table, save_run, setup

PPL_TEXT, PROMPT_TEXT = Path("/usr/share/common-licenses/GPL-3"), Path("/usr/share/common-licenses/Apache-2.0")
VARIANTS = {"turbo4_keep": (4, False), "turbo3_keep": (3, False), "turbo4_qjl_keep": (4, True),
            "turbo3_qjl_keep": (3, True)}         # first and last layers in fp32: measured, not registered


def register_variants() -> None:
    "The keep-the-boundary-layers variants, registered for this run only."
    from mini_infer.engine_config import KV_CACHE_DTYPES
    from mini_infer.quant.kv_quant import turbo_format
    for name, (bits, qjl) in VARIANTS.items():
        if name not in KV_CACHE_DTYPES:
            KV_CACHE_DTYPES.register(name, turbo_format(name, bits, qjl, keep_boundary_layers=True))


def first_divergence(a: list[int], b: list[int]) -> int:
    "Index of the first differing token (len(a) when equal)."
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def measure(dtype: str, prompts, text_ids, max_tokens: int, **options) -> dict:
    "Greedy continuations, text logits and bytes per token of one kv_cache_dtype (and LLM `options`)."
    from mini_infer import LLM, SamplingParams
    from mini_infer.loader import model_bytes
    llm = LLM(kv_cache_dtype=dtype, max_num_batched_tokens=2048, num_kv_blocks=512, **options)
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
    logits = llm.logits(text_ids)                                                   # [S, V] fp32
    return {"tokens": [o.outputs[0].token_ids for o in outs], "logits": logits,
            "kv_bytes_per_token": llm.engine.kv_bytes_per_token, "weight_bytes": model_bytes(llm.engine.model)}


def quality(ref: dict, m: dict, text_ids: list[int], max_tokens: int) -> dict:
    "Greedy agreement, mean logit cosine and perplexity of a run `m` against the reference run `ref`."
    div = [first_divergence(x, y) for x, y in zip(ref["tokens"], m["tokens"])]
    nll = torch.nn.functional.cross_entropy(m["logits"][:-1], torch.tensor(text_ids[1:])).item()
    cos = torch.nn.functional.cosine_similarity(m["logits"], ref["logits"], dim=-1).mean().item()
    return {"mean_first_divergence": sum(div) / len(div), "first_divergence": div,
            "prefix16_identical": sum(d >= 16 for d in div) / len(div),
            "all_identical": sum(d >= max_tokens for d in div) / len(div), "logit_cosine": cos,
            "perplexity": math.exp(nll)}


def add_text_arguments(ap) -> None:
    "The prompt, text and saving options both quality benchmarks take."
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--text-tokens", type=int, default=1024)
    ap.add_argument("--no-save", action="store_true", help="a smoke test: print, record nothing")


def quality_cells(r: dict) -> list[str]:
    "The table cells of one `quality` result, in QUALITY_HEADERS' order."
    return [f"{r['prefix16_identical']:.0%}", f"{r['all_identical']:.0%}", f"{r['mean_first_divergence']:.1f}",
            f"{r['logit_cosine']:.5f}", f"{r['perplexity']:.3f}"]


QUALITY_HEADERS = ["16-prefix same", "64 same", "mean 1st diff", "logit cos", "ppl"]


def record(name: str, model: str, env: str, a, text_ids: list[int], results: dict, headers: list[str],
           rows: list) -> None:
    "Append the run to benchmarks/results (unless --no-save) and print its table."
    run = {"env": env, "model": model, "num_prompts": a.num_prompts, "max_tokens": a.max_tokens,
           "prompt_text": str(PROMPT_TEXT), "ppl_text": str(PPL_TEXT),
           "ppl_text_sha256": hashlib.sha256(PPL_TEXT.read_bytes()).hexdigest(), "text_tokens": len(text_ids),
           "results": results}
    if not a.no_save:
        print(save_run(name, run))
    print_table(headers + QUALITY_HEADERS, rows)


def texts(num_prompts: int, text_tokens: int) -> tuple[list[int], list[list[int]]]:
    "The perplexity text's first `text_tokens` tokens and `num_prompts` 32-token prompts of the prompt text."
    from mini_infer.engine.tokenizer import Tokenizer
    from mini_infer.weights import bundled_model_path
    tok = Tokenizer.from_gguf(bundled_model_path())
    text_ids = tok.encode(PPL_TEXT.read_text())[:text_tokens]
    pool = tok.encode(PROMPT_TEXT.read_text())
    stride = (len(pool) - 32) // num_prompts
    return text_ids, [pool[i * stride: i * stride + 32] for i in range(num_prompts)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="auto,fp8,turbo4,turbo3,turbo4_qjl,turbo3_qjl,turbo4_keep,turbo3_keep,"
                                        "turbo4_qjl_keep,turbo3_qjl_keep")
    add_text_arguments(ap)
    a = ap.parse_args()
    env = setup()
    torch.set_num_threads(1)
    register_variants()
    from mini_infer.engine_config import KV_CACHE_DTYPES
    text_ids, prompts = texts(a.num_prompts, a.text_tokens)
    dtypes = [d for d in a.dtypes.split(",") if d in KV_CACHE_DTYPES.names()]
    ref = measure("auto", prompts, text_ids, a.max_tokens)
    rows, results = [], {}
    for dtype in dtypes:
        m = ref if dtype == "auto" else measure(dtype, prompts, text_ids, a.max_tokens)
        r = {"kv_bytes_per_token": m["kv_bytes_per_token"], **quality(ref, m, text_ids, a.max_tokens)}
        results[dtype] = r
        rows.append([dtype, r["kv_bytes_per_token"], f"{r['kv_bytes_per_token'] / ref['kv_bytes_per_token']:.3f}",
                     *quality_cells(r)])
        print(rows[-1], flush=True)
    record("kv_quality", "SmolLM2-135M-Instruct Q4_1 GGUF (dequantized, fp32)", env, a, text_ids, results,
           ["kv_cache_dtype", "KV B/token", "vs auto"], rows)

if __name__ == "__main__":
    main()
