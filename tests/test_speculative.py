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

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 2?", "Say hello in Spanish.",
             "What is the largest planet?", "Give me a synonym for happy.", "What do bees make?",
             "Repeat after me: the quick brown fox jumps over the lazy dog."]
OPTIONS = dict(block_size=16, max_num_batched_tokens=128, num_kv_blocks=40)      # chunks, preemption


def convs() -> list:
    "32 chats: 8 questions x 4, half behind a shared system prompt (prefix-cache hits)."
    return [[{"role": "system", "content": SYSTEM}] * (i % 2) + [{"role": "user", "content": q}]
            for i in range(4) for q in QUESTIONS]


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
    outs = llm.chat(convs(), [SamplingParams(temperature=0, max_tokens=6 + i % 8, ignore_eos=True)
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
    spec = {"method": method, "num_speculative_tokens": 3,
            **({"num_layers": 8} if method == "layer_skip" else {}),
            **({"model": str(smol[1])} if method == "draft_model" else {})}
    got, st = run(smol[0], spec)
    assert got == want
    assert st["num_preemptions"] > 0 and st["prefix_cache_hits"] > 0
    assert st["spec_decode_num_drafts"] > 0 and st["spec_decode_num_accepted_tokens"] > 0
    print(method, {k: round(v, 3) for k, v in st.items() if k.startswith("spec_decode")},
          st["num_preemptions"], "preemptions")
