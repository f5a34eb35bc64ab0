"""The serving engine on the real SmolLM2-135M-Instruct (bundled GGUF), on the CPU."""
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from mini_infer import LLM, SamplingParams  # noqa: E402

QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 2?", "Say hello in Spanish.",
             "What is the largest planet?", "Give me a synonym for happy.", "What do bees make?",
             "What is the boiling point of water in Celsius?", "Who wrote Hamlet?", "What is H2O?",
             "Name a fruit that is yellow.", "How many legs does a spider have?", "What is the opposite of cold?",
             "Which ocean is the largest?", "What language is spoken in Brazil?", "What is the square root of 81?"]


@pytest.fixture(scope="module")
def llm():
    torch.set_num_threads(int(os.environ.get("MINI_INFER_THREADS", "1")))
    return LLM(max_num_batched_tokens=512)


def test_16_concurrent_chats_equal_one_at_a_time(llm):
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS]
    params = SamplingParams(temperature=0, max_tokens=24)
    together = [o.outputs[0] for o in llm.chat(convs, params)]
    alone = [llm.chat(c, params)[0].outputs[0] for c in convs]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    assert [o.text for o in together] == [o.text for o in alone]
    assert "Paris" in together[0].text
    st = llm.engine.stats()
    assert st["kv_blocks_free"] == st["kv_blocks_total"]


def test_stop_string_and_streaming_text(llm):
    params = SamplingParams(temperature=0, max_tokens=32, stop=["answer"])
    out = llm.generate("The capital of France is", params)[0].outputs[0]
    assert out.finish_reason == "stop" and "answer" not in out.text and out.text.startswith(" Paris")
