"""Speculative decoding on the real SmolLM2-135M-Instruct (bundled GGUF), CPU: greedy output identical to the
same engine without speculation for 32 prompts and each proposer, with batching, chunked prefill, prefix caching
and preemption all happening (chapter 50 checks the same on tiny random configs). The draft model is SmolLM2's
own first 8 layers (with its final norm and tied head) saved as a checkpoint: a real draft with its own KV."""
import json
import os

import pytest
import torch
from safetensors.torch import save_file

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from mini_infer import LLM, SamplingParams  # noqa: E402
from mini_infer.config import ModelConfig  # noqa: E402
from mini_infer.engine.tokenizer import Tokenizer  # noqa: E402
from mini_infer.weights import bundled_model_path, read_gguf  # noqa: E402

PREFIX = "Answer the question in one short sentence, please. "      # shared by half: prefix-cache hits
QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 2?", "Say hello in Spanish.",
             "What is the largest planet?", "Give me a synonym for happy.", "What do bees make?",
             "Repeat after me: the quick brown fox jumps over the lazy dog, the quick brown fox"]
OPTIONS = dict(block_size=8, max_num_batched_tokens=64, num_kv_blocks=24)     # chunked prefill, preemption


def prompts() -> list[str]:
    "32 prompts: 8 questions x 4, half behind a shared prefix."
    return [PREFIX * (i % 2) + q for i in range(4) for q in QUESTIONS]


def save_checkpoint(path, config: dict, weights: dict, tok: Tokenizer):
    "A checkpoint directory: config.json, one safetensors file, SmolLM2's tokenizer and chat template."
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config))
    tok.backend.save(str(path / "tokenizer.json"))
    special = tok.special_tokens
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": special.get("bos_token"), "eos_token": special.get("eos_token"),
         "chat_template": tok.chat_template}))
    return path


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    "(target, draft) directories: SmolLM2 dequantized once, and its first 8 layers."
    torch.set_num_threads(int(os.environ.get("MINI_INFER_THREADS", "1")))
    gguf = bundled_model_path()
    config = {k: v for k, v in ModelConfig.from_gguf(gguf).raw.items() if k != "gguf_metadata"}
    weights, tok = dict(read_gguf(gguf, progress=False)[1]), Tokenizer.from_gguf(gguf)
    root = tmp_path_factory.mktemp("smollm2")
    draft = {k: v for k, v in weights.items() if not k.startswith("model.layers.")
             or int(k.split(".")[2]) < 8}
    return (save_checkpoint(root / "target", config, weights, tok),
            save_checkpoint(root / "draft", {**config, "num_hidden_layers": 8}, draft, tok))


def run(path, spec=None) -> tuple[list, dict]:
    llm = LLM(str(path), **OPTIONS, speculative_config=spec)
    outs = llm.generate(prompts(), [SamplingParams(temperature=0, max_tokens=6 + i % 8, ignore_eos=True)
                                    for i in range(32)])
    st = llm.engine.stats()
    assert st["kv_blocks_free"] == st["kv_blocks_total"] and not llm.engine.requests
    return [o.outputs[0].token_ids for o in outs], st


@pytest.fixture(scope="module")
def baseline(smol):
    return run(smol[0])


@pytest.mark.parametrize("method", ["ngram", "layer_skip", "draft_model"])
def test_greedy_identical_on_smollm2(smol, baseline, method):
    want, st0 = baseline
    spec = {"method": method, "num_speculative_tokens": 2,
            **({"num_layers": 8} if method == "layer_skip" else {}),
            **({"model": str(smol[1])} if method == "draft_model" else {})}
    got, st = run(smol[0], spec)
    assert got == want
    assert st["num_preemptions"] > 0 and st["prefix_cache_hits"] > 0, st
    assert st["spec_decode_num_drafts"] > 0 and st["spec_decode_num_accepted_tokens"] > 0
    print(method, {k: round(v, 3) for k, v in st.items() if k.startswith("spec_decode")},
          st["num_preemptions"], "preemptions")


def test_gpu_benchmark_smoke_appends_runs(tmp_path):
    "benchmarks/gpu/speculative.py --smoke: the H200 script's code on tiny CPU shapes, each run appended."
    import subprocess
    import sys

    from conftest import ENV, ROOT
    cmd = [sys.executable, str(ROOT / "benchmarks/gpu/speculative.py"), "--smoke", "--batches", "1,2",
           "--out", str(tmp_path)]
    for _ in range(2):
        r = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (path,) = tmp_path.glob("cpu-smoke_speculative_*.json")
    runs = json.loads(path.read_text())["runs"]
    assert len(runs) == 2 and all(run["smoke"] for run in runs)
    rows = runs[-1]["rows"]
    assert {(r["work"], r["method"].split()[0]) for r in rows} == {
        ("smollm2", "none"), ("smollm2", "ngram"), ("smollm2", "layer_skip"),
        ("7b", "none"), ("7b", "draft_model"), ("7b", "ngram")}
    assert all(r["identical"] == 1.0 and r["vs_none"] > 0 for r in rows)     # fp32 on the CPU: greedy identical
