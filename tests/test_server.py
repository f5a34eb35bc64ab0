"""The OpenAI-compatible server, driven by the official `openai` client against a real `mini-infer serve` process."""
import asyncio
import json
import signal
import socket
import threading
import time

import httpx
import openai
import pytest

from conftest import API_KEY, SERVING, Server

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


def test_queue_full_gives_429_and_counts_sequences(serve_logs):
    "--max-queue counts sequences (n of them per request), not requests; n alone above the queue is a 400."
    s = Server("--max-queue", "4", "--max-num-seqs", "1", log_dir=serve_logs)
    try:
        async def burst():
            async with httpx.AsyncClient(timeout=300) as h:
                body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 24, "ignore_eos": True}
                return await asyncio.gather(*(h.post(f"{s.url}/v1/completions", json=body) for _ in range(8)))
        codes = [r.status_code for r in asyncio.run(burst())]
        assert 429 in codes and 200 in codes, codes
        r429 = next(r for r in asyncio.run(burst()) if r.status_code == 429)
        assert r429.headers["retry-after"] and r429.json()["error"]["type"] == "rate_limit_error"

        async def n_requests():
            async with httpx.AsyncClient(timeout=300) as h:
                long = {"model": MODEL, "prompt": PROMPT, "max_tokens": 32, "ignore_eos": True}
                running = asyncio.create_task(h.post(f"{s.url}/v1/completions", json=long))
                while metrics(s)["mini_infer:num_requests_running"] < 1:
                    await asyncio.sleep(0.05)
                three = asyncio.create_task(h.post(f"{s.url}/v1/completions",
                                                   json={**long, "n": 3, "temperature": 1, "max_tokens": 4}))
                while metrics(s)["mini_infer:num_requests_waiting"] < 3:
                    await asyncio.sleep(0.05)
                two = await h.post(f"{s.url}/v1/completions", json={**long, "n": 2, "temperature": 1})
                five = await h.post(f"{s.url}/v1/completions", json={**long, "n": 5, "temperature": 1})
                return two, five, await three, await running
        two, five, three, running = asyncio.run(n_requests())
        assert two.status_code == 429 and "3 sequences are already waiting" in two.json()["error"]["message"]
        assert five.status_code == 400 and five.json()["error"]["param"] == "n"
        assert three.status_code == 200 and len(three.json()["choices"]) == 3 and running.status_code == 200
        assert httpx.get(f"{s.url}/health").status_code == 200
    finally:
        s.stop()


def post(server, route: str, payload, **kw) -> httpx.Response:
    "POST a JSON body with the key; `json.dumps` escapes a lone surrogate (httpx's encoder would refuse it)."
    return httpx.post(f"{server.url}{route}", content=json.dumps(payload), timeout=kw.pop("timeout", 120),
                      headers={"Authorization": f"Bearer {API_KEY}", "content-type": "application/json"}, **kw)


def test_seed_range_and_the_engine_survives(server, client):
    "Issue 13.1: a seed is an int64; the children seed + i of the largest one run; nothing kills the engine."
    for seed in (2**64, -2**63 - 1, 2**64 - 1):
        r = post(server, "/v1/completions", {"model": MODEL, "prompt": PROMPT, "seed": seed, "n": 2,
                                             "temperature": 1, "max_tokens": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "seed", r.text
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, n=2, temperature=1, seed=2**63 - 1)
    assert len(r.choices) == 2 and r.usage.completion_tokens == 8
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert "Paris" in client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0).choices[0].text
    assert "Traceback" not in server.log()


def test_logprobs_and_n_are_bounded(server):
    "Issue 13.2 and 13.4: logprobs, top_logprobs <= --max-logprobs (20), n <= 128, a 400 naming the limit."
    for route, payload, param, limit in (
            ("/v1/completions", {"prompt": PROMPT, "logprobs": 1_000_000}, "logprobs", "20"),
            ("/v1/chat/completions", {"messages": CHAT, "logprobs": True, "top_logprobs": 21}, "top_logprobs", "20"),
            ("/v1/completions", {"prompt": PROMPT, "n": 200_000, "temperature": 1}, "n", "128"),
            ("/v1/chat/completions", {"messages": CHAT, "n": 129, "temperature": 1}, "n", "128")):
        r = post(server, route, {"model": MODEL, "max_tokens": 2, **payload})
        err = r.json()["error"]
        assert r.status_code == 400 and err["param"] == param and limit in err["message"], r.text
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": PROMPT, "max_tokens": 2, "logprobs": 20})
    assert r.status_code == 200 and len(r.json()["choices"][0]["logprobs"]["top_logprobs"][0]) == 20


def test_unstreamed_request_stops_when_its_client_leaves(server):
    "Issue 13.3: a non-streaming client that times out aborts its request: blocks free, generation stops early."
    before = metrics(server)["mini_infer:generation_tokens_total"]
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/completions", json=body, timeout=3,
                   headers={"Authorization": f"Bearer {API_KEY}"})
    for _ in range(300):
        m = metrics(server)
        if m["mini_infer:num_requests_running"] == 0 and m["mini_infer:kv_blocks_free"] == m["mini_infer:kv_blocks_total"]:
            break
        time.sleep(0.1)
    assert m["mini_infer:num_requests_running"] == 0 and m["mini_infer:kv_blocks_free"] == m["mini_infer:kv_blocks_total"]
    assert m["mini_infer:generation_tokens_total"] - before < 2000
    assert "finish abort (499: the client closed the connection)" in server.log()


def test_request_size_is_bounded_before_parsing(server):
    """Issue 13.5: a body over --max-request-bytes is a 413 (with or without Content-Length); a prompt longer in
    bytes than the context can hold is a 400 before it is tokenized."""
    big = json.dumps({"model": MODEL, "prompt": "a" * (5 * 2**20)}).encode()
    h = {"Authorization": f"Bearer {API_KEY}", "content-type": "application/json"}
    r = httpx.post(f"{server.url}/v1/completions", content=big, headers=h, timeout=60)
    assert r.status_code == 413 and "4,194,304" in r.json()["error"]["message"]
    chunks = (big[i:i + 2**20] for i in range(0, len(big), 2**20))          # no Content-Length: chunked
    r = httpx.post(f"{server.url}/v1/completions", content=chunks, headers=h, timeout=60)
    assert r.status_code == 413 and "content-length" not in r.request.headers
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": "a" * 700_000, "max_tokens": 1})
    err = r.json()["error"]
    assert r.status_code == 400 and err["param"] == "prompt" and "bytes" in err["message"], err
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_lone_surrogates_are_400_naming_the_field(server):
    "Issue 13.7: '\\ud800' in a prompt, a message or the model name: 400 with the field, no 500, no traceback."
    for route, payload, param in (
            ("/v1/completions", {"model": MODEL, "prompt": "\ud800"}, "prompt"),
            ("/v1/completions", {"model": MODEL, "prompt": ["fine", "x\udfff"]}, "prompt"),
            ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi \ud800"}]},
             "messages"),
            ("/v1/chat/completions", {"model": "\ud800", "messages": CHAT}, "model"),
            ("/v1/completions", {"model": MODEL, "prompt": PROMPT, "stop": ["\udc00"]}, "stop")):
        r = post(server, route, payload)
        err = r.json()["error"]
        assert r.status_code == 400 and err["param"] == param and "surrogate" in err["message"], r.text
    assert "Traceback" not in server.log()


def test_max_tokens_zero_and_too_long_prompts_name_the_right_field(server):
    "Issue 13.10: chat's max_tokens 0 is a 400 as in completions; a prompt too long is the prompt's fault."
    for field in ("max_tokens", "max_completion_tokens"):
        r = post(server, "/v1/chat/completions", {"model": MODEL, "messages": CHAT, field: 0})
        assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    r = post(server, "/v1/completions", {"model": MODEL, "prompt": PROMPT, "max_tokens": 0})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"
    long_chat = [{"role": "user", "content": "hi " * 9000}]
    err = post(server, "/v1/chat/completions", {"model": MODEL, "messages": long_chat}).json()["error"]
    assert err["param"] == "messages" and "max_tokens" not in err["message"] and "8192" in err["message"], err
    err = post(server, "/v1/completions", {"model": MODEL, "prompt": PROMPT * 2000}).json()["error"]
    assert err["param"] == "prompt" and "max_tokens" not in err["message"], err
    err = post(server, "/v1/completions", {"model": MODEL, "prompt": PROMPT, "max_tokens": 8190}).json()["error"]
    assert err["param"] == "max_tokens" and "at most 8187" in err["message"], err


def test_strict_types_405_and_the_schema(server):
    "Issue 13.11: lax coercions are 400; a 405 names the allowed methods; the OpenAPI schema tells the truth."
    for lax in ({"max_tokens": "16"}, {"max_tokens": True}, {"stream": "yes"}, {"temperature": "0.5"}):
        r = post(server, "/v1/completions", {"model": MODEL, "prompt": PROMPT, **lax})
        assert r.status_code == 400 and r.json()["error"]["param"] == next(iter(lax)), r.text
    r = httpx.get(f"{server.url}/v1/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"})
    assert r.status_code == 405 and r.headers["allow"] == "POST" and set(r.json()["error"]) == {
        "message", "type", "param", "code"}
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert '"422"' not in json.dumps(schema)
    assert "text/event-stream" in schema["paths"]["/v1/completions"]["post"]["responses"]["200"]["content"]
    assert list(schema["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]


def test_streamed_logprobs_offsets_echo_and_equal_strings(server, client):
    "Issue 13.11: streamed text_offset continues across chunks; echo scores the prompt; equal strings both kept."
    kw = dict(model=MODEL, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=5)
    full = client.completions.create(**kw).choices[0].logprobs
    chunks = [ch.choices[0].logprobs for ch in client.completions.create(**kw, stream=True) if ch.choices]
    assert sum((c.text_offset for c in chunks), []) == full.text_offset == \
        [sum(len(t) for t in full.tokens[:k]) for k in range(6)]
    echo = client.completions.create(**{**kw, "max_tokens": 2}, echo=True).choices[0]
    assert echo.text.startswith(PROMPT) and len(echo.logprobs.tokens) == 5 + 2
    assert echo.logprobs.token_logprobs[0] is None and echo.logprobs.top_logprobs[0] is None
    assert all(v <= 0 for v in echo.logprobs.token_logprobs[1:]) and len(echo.logprobs.top_logprobs[1]) == 5
    c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say 🗼"}], max_tokens=6,
                                       temperature=0, logprobs=True, top_logprobs=20)
    for entry in c.choices[0].logprobs.content:
        assert len(entry.top_logprobs) == 20                  # a list: tokens with equal strings all kept


def test_a_port_in_use_never_says_serving(server, serve_logs):
    "Issue 13.12: 'mini-infer: serving' is printed after the port is bound, so a busy port never prints it."
    busy = Server(log_dir=serve_logs, port=server.port, wait=False)
    assert busy.proc.wait(timeout=180) != 0
    log = busy.log()
    busy.stop()
    assert SERVING not in log and "address already in use" in log.lower(), log
    assert not busy.log_path.exists()                                    # no log file left behind


def stream_lines(url: str, payload: dict, out: dict, key: str) -> None:
    with httpx.stream("POST", f"{url}/v1/completions", json=payload, timeout=120) as r:
        out[key] = [line for line in r.iter_lines() if line]


@pytest.mark.parametrize("signals", [1, 2])
def test_sigint_drains_and_exits_0(serve_logs, signals):
    """Issue 13.6: SIGINT stops admitting (503), ends in-flight requests with an error after the grace, exits 0;
    a second SIGINT does it at once, with no 500 and no traceback."""
    s = Server("--shutdown-grace", "3", log_dir=serve_logs, wait=False)
    try:
        deadline = time.time() + 180
        while SERVING not in s.log():                  # issue 13.12: whoever sees the line can connect at once
            assert s.proc.poll() is None and time.time() < deadline, s.log()
            time.sleep(0.05)
        socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
        s.wait_healthy()
        long = {"model": MODEL, "prompt": PROMPT, "max_tokens": 4000, "ignore_eos": True}
        got, threads = {}, []
        threads.append(threading.Thread(target=stream_lines, args=(s.url, {**long, "stream": True}, got, "stream")))
        threads.append(threading.Thread(target=lambda: got.update(plain=httpx.post(
            f"{s.url}/v1/completions", json=long, timeout=120))))
        for t in threads:
            t.start()
        while metrics(s)["mini_infer:num_requests_running"] < 2:
            time.sleep(0.05)
        s.proc.send_signal(signal.SIGINT)
        while "SIGINT: shutting down" not in s.log():
            time.sleep(0.05)
        assert httpx.post(f"{s.url}/v1/completions", json={"model": MODEL, "prompt": PROMPT}).status_code == 503
        assert httpx.get(f"{s.url}/health").status_code == 503
        if signals == 2:
            s.proc.send_signal(signal.SIGINT)
        for t in threads:
            t.join(timeout=120)
        assert s.proc.wait(timeout=60) == 0
        log = s.log()
    finally:
        s.stop()
    assert got["plain"].status_code == 503 and "shutting down" in got["plain"].json()["error"]["message"]
    assert got["stream"][-1] == "data: [DONE]" and "shutting down" in got["stream"][-2]
    assert "Traceback" not in log and " 500 " not in log and "CancelledError" not in log
    assert ("SIGINT again" in log) == (signals == 2)
