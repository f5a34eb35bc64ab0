"""Speculative decoding through `mini-infer serve --speculative-config`, driven by the official `openai` client:
greedy text and the target's logprobs as without speculation, n > 1 with a seed, stop strings, streaming, and the
`mini_infer:spec_decode_*` figures in /metrics and the request's own in `usage` (--return-request-metrics). A tiny random Llama with SmolLM2's tokenizer keeps it fast."""
import json

import httpx
import openai
import pytest

from conftest import API_KEY, Server

SPEC = {"method": "ngram", "num_speculative_tokens": 3}
PROMPT = [504, 3575, 282, 4649, 314] * 6                 # a repeated phrase: prompt lookup finds matches


@pytest.fixture(scope="module")
def server(tiny_model, serve_logs):
    s = Server(str(tiny_model), "--served-model-name", "tiny", "--api-key", API_KEY,
               "--speculative-config", json.dumps(SPEC), "--return-request-metrics", log_dir=serve_logs)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def reference(tiny_model):
    "Greedy output of the same checkpoint without speculation, in this process: token ids, text, logprobs."
    from mini_infer import LLM, SamplingParams
    c = LLM(str(tiny_model)).generate([PROMPT], SamplingParams(temperature=0, max_tokens=24, logprobs=2))
    return c[0].outputs[0]


def metrics(server) -> dict:
    return {name: float(value) for name, value in (line.rsplit(" ", 1) for line in
            httpx.get(f"{server.url}/metrics").text.splitlines() if line.startswith("mini_infer:spec"))}


def test_greedy_text_and_target_logprobs_as_without_speculation(client, reference):
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=24, temperature=0, logprobs=2)
    c = r.choices[0]
    assert c.text == reference.text and r.usage.completion_tokens == 24
    got, want = c.logprobs.token_logprobs, [lp.logprob for lp in reference.logprobs]
    assert len(got) == 24 and max(abs(a - b) for a, b in zip(got, want)) < 1e-4   # verify chunk vs decode
    assert all(len(t) == 2 for t in c.logprobs.top_logprobs)
    u = r.usage.model_extra                           # --return-request-metrics: this request's figures
    assert u["spec_num_draft_tokens"] >= u["spec_num_verifications"] > 0 and u["spec_proposer_seconds"] > 0
    assert u["spec_acceptance_rate"] == pytest.approx(u["spec_num_accepted_tokens"] / u["spec_num_draft_tokens"])
    assert u["spec_mean_accepted_length"] == pytest.approx(1 + u["spec_num_accepted_tokens"]
                                                           / u["spec_num_verifications"])
    chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=24, temperature=0,
                                            stream=True))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == reference.text


def test_stop_string_cuts_inside_accepted_drafts(client, reference):
    stop = reference.text[len(reference.text) // 2:][:6]
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=24, temperature=0, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == reference.text[:reference.text.index(stop)]


def test_n_2_seeded_streamed_chat_is_reproducible(client):
    kw = dict(model="tiny", messages=[{"role": "user", "content": "Say hello hello hello"}], max_tokens=16,
              temperature=0.8, top_p=0.9, n=2, seed=7)
    full = client.chat.completions.create(**kw)
    texts = {c.index: c.message.content for c in full.choices}
    streamed = {0: "", 1: ""}
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    for ch in chunks:
        for c in ch.choices:
            streamed[c.index] += c.delta.content or ""
    assert sorted(texts) == [0, 1] and streamed == texts
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_metrics_report_acceptance_and_proposer_time(server, client):
    client.completions.create(model="tiny", prompt=PROMPT, max_tokens=16, temperature=0)
    m = metrics(server)
    for name in ("num_drafts_total", "num_draft_tokens_total", "num_accepted_tokens_total",
                 "proposer_seconds_total", "acceptance_rate", "mean_accepted_length"):
        assert f"mini_infer:spec_decode_{name}" in m, name
    assert m["mini_infer:spec_decode_num_draft_tokens_total"] >= m["mini_infer:spec_decode_num_drafts_total"] > 0
    accepted, drafts = (m[f"mini_infer:spec_decode_{k}_total"] for k in ("num_accepted_tokens", "num_draft_tokens"))
    assert m["mini_infer:spec_decode_acceptance_rate"] == pytest.approx(accepted / drafts)
    assert m["mini_infer:spec_decode_mean_accepted_length"] >= 1 and m["mini_infer:spec_decode_proposer_seconds_total"] > 0
