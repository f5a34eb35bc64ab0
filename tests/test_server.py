"""The OpenAI-compatible server, driven by the official `openai` client against a real `mini-infer serve` process."""
import asyncio
import json
import time

import httpx
import openai
import pytest

from conftest import API_KEY, Server

MODEL = "SmolLM2-135M-Instruct"
PROMPT = "The capital of France is"
CHAT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=120)


def metrics(server) -> dict:
    out = {}
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith("mini_infer:") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_models_list(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_completion_plain_and_streamed(client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0)
    c = r.choices[0]
    assert "Paris" in c.text and c.finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (5, 8, 13)
    assert r.id.startswith("cmpl-") and r.model == MODEL and r.created > 0 and r.object == "text_completion"
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == c.text
    assert chunks[-1].choices[0].finish_reason == "length"


def test_completion_echo_and_token_prompt(client):
    r = client.completions.create(model=MODEL, prompt=[504, 3575, 282, 4649, 314], max_tokens=4, temperature=0,
                                  echo=True)
    assert r.choices[0].text.startswith(PROMPT) and "Paris" in r.choices[0].text


def test_chat_streamed_with_usage(client):
    full = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=16, temperature=0)
    stream = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=16, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].delta.content is None
    assert chunks[-1].choices == [] and chunks[-1].usage == full.usage
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content and "Paris" in text
    assert full.choices[0].message.role == "assistant" and full.object == "chat.completion"


def test_stop_strings_and_length(client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=32, temperature=0, stop=["answer"])
    assert r.choices[0].finish_reason == "stop" and "answer" not in r.choices[0].text
    assert r.choices[0].text.startswith(" Paris")
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_n_and_seed(client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0.8, n=2, seed=11)
    assert sorted(c.index for c in r.choices) == [0, 1] and r.usage.completion_tokens == 16
    a = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=12, temperature=0.8, seed=5)
    b = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=12, temperature=0.8, seed=5)
    assert a.choices[0].message.content == b.choices[0].message.content


def test_logprobs_shapes(client):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
    assert all(len(t) == 3 for t in lp.top_logprobs) and all(v <= 0 for v in lp.token_logprobs)
    assert "".join(lp.tokens) == r.choices[0].text
    c = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=4, temperature=0, logprobs=True,
                                       top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert len(content) == 4 and all(len(e.top_logprobs) == 2 for e in content)
    assert content[0].top_logprobs[0].logprob >= content[0].top_logprobs[1].logprob


def test_16_parallel_streams_equal_serial(server, client):
    prompts = [f"Question {i}: name a colour. Answer:" for i in range(16)]
    serial = [client.completions.create(model=MODEL, prompt=p, max_tokens=10, temperature=0).choices[0].text
              for p in prompts]

    async def one(ac, p):
        s = await ac.completions.create(model=MODEL, prompt=p, max_tokens=10, temperature=0, stream=True)
        return "".join([ch.choices[0].text async for ch in s if ch.choices])

    async def all_():
        ac = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=300)
        return await asyncio.gather(*(one(ac, p) for p in prompts))

    assert asyncio.run(all_()) == serial


def test_disconnect_frees_blocks(server):
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 400, "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.Client(timeout=60) as h:
        with h.stream("POST", f"{server.url}/v1/completions", json=body,
                      headers={"Authorization": f"Bearer {API_KEY}"}) as r:
            lines = r.iter_lines()
            got = [next(lines) for _ in range(4)]
            assert any(l.startswith("data: ") for l in got)
            assert metrics(server)["mini_infer:num_requests_running"] == 1
    for _ in range(100):
        m = metrics(server)
        if m["mini_infer:num_requests_running"] == 0 and m["mini_infer:kv_blocks_free"] == m["mini_infer:kv_blocks_total"]:
            break
        time.sleep(0.1)
    assert m["mini_infer:num_requests_running"] == 0 and m["mini_infer:kv_blocks_free"] == m["mini_infer:kv_blocks_total"]


@pytest.mark.parametrize("payload, status, needle", [
    ({"model": MODEL, "prompt": PROMPT, "max_tokens": -3}, 400, "max_tokens"),
    ({"model": MODEL, "prompt": PROMPT, "temperature": -1}, 400, "temperature"),
    ({"model": MODEL, "prompt": PROMPT, "n": 0}, 400, "n must"),
    ({"model": MODEL, "prompt": PROMPT, "top_p": 2.0}, 400, "top_p"),
    ({"model": MODEL, "prompt": PROMPT, "max_tokens": "many"}, 400, "max_tokens"),
    ({"model": MODEL, "prompt": PROMPT * 2000, "max_tokens": 10}, 400, "context of 8192"),
    ({"model": MODEL, "messages": "hi"}, 400, "prompt"),
    ({"model": "gpt-9", "prompt": PROMPT}, 404, "gpt-9"),
])
def test_error_matrix(server, payload, status, needle):
    r = httpx.post(f"{server.url}/v1/completions", json=payload, headers={"Authorization": f"Bearer {API_KEY}"},
                   timeout=60)
    err = r.json()["error"]
    assert r.status_code == status and needle in err["message"], (r.status_code, err)
    assert set(err) == {"message", "type", "param", "code"}


def test_more_errors_and_survival(server, client):
    h = {"Authorization": f"Bearer {API_KEY}", "content-type": "application/json"}
    r = httpx.post(f"{server.url}/v1/chat/completions", content=b'{"model": ', headers=h)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    r = httpx.post(f"{server.url}/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "wizard",
                                                                                            "content": "x"}]}, headers=h)
    assert r.status_code == 400 and "role" in r.json()["error"]["message"]
    r = httpx.get(f"{server.url}/v1/engines", headers=h)
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.post(f"{server.url}/v1/completions", json={"model": MODEL, "prompt": PROMPT * 2000, "max_tokens": 10},
                   headers=h)
    msg = r.json()["error"]["message"]
    assert "10" in msg and "8192" in msg and "tokens" in msg
    for bad in ({}, {"Authorization": "Bearer nope"}):
        r = httpx.get(f"{server.url}/v1/models", headers=bad)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert "Traceback" not in server.log()
    assert client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=2).choices[0].text


def test_metrics_and_request_log(server, client):
    client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0)
    text = httpx.get(f"{server.url}/metrics").text
    for name in ("mini_infer:num_requests_running", "mini_infer:num_requests_waiting", "mini_infer:kv_blocks_free",
                 "mini_infer:kv_blocks_total", "mini_infer:prefix_cache_hit_rate", "mini_infer:prompt_tokens_total",
                 "mini_infer:generation_tokens_total", "mini_infer:num_preemptions_total",
                 "mini_infer:time_to_first_token_seconds_bucket", "mini_infer:inter_token_latency_seconds_bucket"):
        assert name in text, name
    assert "completion 4 tokens" in server.log() and "ttft" in server.log()


def test_queue_full_gives_429():
    s = Server("--max-queue", "1", "--max-num-seqs", "1")
    try:
        async def burst():
            async with httpx.AsyncClient(timeout=300) as h:
                body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 64, "ignore_eos": True}
                return await asyncio.gather(*(h.post(f"{s.url}/v1/completions", json=body) for _ in range(6)))
        codes = [r.status_code for r in asyncio.run(burst())]
        assert 429 in codes and 200 in codes, codes
        r429 = next(r for r in asyncio.run(burst()) if r.status_code == 429)
        assert r429.headers["retry-after"] and r429.json()["error"]["type"] == "rate_limit_error"
        assert httpx.get(f"{s.url}/health").status_code == 200
    finally:
        s.stop()
