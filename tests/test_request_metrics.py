"""Per-request metrics end to end (issue 25, items 2 and 4): `mini-infer serve --return-request-metrics` puts the
engine's figures in `usage` on both routes, streamed and not, and in its log line; without the flag the bodies are
OpenAI's; `mini-infer generate --stats` and `/stats` in `mini-infer chat` print them. A tiny random Llama with
SmolLM2's tokenizer keeps each process fast."""
import json
import subprocess

import httpx
import pytest

from conftest import ENV, ROOT, Server, mini_infer_cmd

OPENAI_USAGE = {"prompt_tokens", "completion_tokens", "total_tokens"}
METRICS = {"num_prompt_tokens", "num_cached_tokens", "num_generation_tokens", "queued_time", "prefill_time",
           "time_to_first_token", "decode_time", "e2e_latency", "decode_tokens_per_s", "inter_token_latency_p50",
           "inter_token_latency_p90", "inter_token_latency_p99", "num_preemptions", "kv_peak_blocks",
           "kv_peak_bytes", "finish_reasons"}


@pytest.fixture(scope="module")
def servers(tiny_model, serve_logs):
    on = Server(str(tiny_model), "--return-request-metrics", "--block-size", "4", log_dir=serve_logs)
    off = Server(str(tiny_model), "--block-size", "4", log_dir=serve_logs)
    yield on, off
    on.stop()
    off.stop()


def name(server) -> str:
    return httpx.get(f"{server.url}/v1/models").json()["data"][0]["id"]


def bodies(server, route: str, payload: dict) -> tuple[dict, dict]:
    "The `usage` of one request unstreamed and of the same request streamed with include_usage."
    url, payload = f"{server.url}/v1/{route}", {"model": name(server), **payload}
    plain = httpx.post(url, json=payload, timeout=120)
    assert plain.status_code == 200, plain.text
    with httpx.stream("POST", url, json={**payload, "stream": True, "stream_options": {"include_usage": True}},
                      timeout=120) as r:
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return plain.json()["usage"], json.loads(events[-2])["usage"]


ROUTES = [("completions", {"prompt": "The capital of France is", "max_tokens": 6, "ignore_eos": True}),
          ("chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                                "ignore_eos": True})]


@pytest.mark.parametrize("route, payload", ROUTES)
def test_usage_carries_the_metrics_with_the_flag(servers, route, payload):
    on, _ = servers
    for usage in bodies(on, route, payload):
        assert set(usage) == OPENAI_USAGE | METRICS, set(usage) ^ (OPENAI_USAGE | METRICS)
        assert usage["num_prompt_tokens"] == usage["prompt_tokens"] > 0
        assert usage["num_generation_tokens"] == usage["completion_tokens"] == 6
        assert usage["finish_reasons"] == ["length"] and usage["num_preemptions"] == 0
        assert 0 <= usage["queued_time"] <= usage["time_to_first_token"] <= usage["e2e_latency"]
        blocks = usage["kv_peak_blocks"]["full"]
        assert blocks == -(-(usage["prompt_tokens"] + 5) // 4)           # K/V of prompt + 5 fed-back tokens
        assert usage["kv_peak_bytes"] % blocks == 0 and usage["decode_tokens_per_s"] > 0


def test_the_second_request_hits_the_prefix_cache(servers):
    "The streamed request repeats the unstreamed one's prompt: its full blocks come from the prefix cache."
    on, _ = servers
    payload = {"prompt": "One two three four five six seven eight nine ten", "max_tokens": 2}
    first, second = bodies(on, "completions", payload)
    assert first["num_cached_tokens"] == 0
    assert second["num_cached_tokens"] == (second["prompt_tokens"] - 1) // 4 * 4 > 0


@pytest.mark.parametrize("route, payload", ROUTES)
def test_without_the_flag_usage_is_openais(servers, route, payload):
    _, off = servers
    for usage in bodies(off, route, payload):
        assert set(usage) == OPENAI_USAGE


def test_log_line_and_histograms(servers):
    on, off = servers
    bodies(on, *ROUTES[0])
    log = on.log()
    assert "queued " in log and "kv peak " in log and "itl p50/p90/p99 " in log and "finish length" in log
    text = httpx.get(f"{on.url}/metrics").text
    for metric in ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                   "request_queue_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds",
                   "request_prompt_tokens", "request_generation_tokens"):
        count = [line for line in text.splitlines() if line.startswith(f"mini_infer:{metric}_count")]
        assert count and float(count[0].split()[-1]) > 0, metric
    assert "kv peak " in off.log()                     # the log line does not depend on the flag


def cli(*args, stdin: str | None = None):
    return subprocess.run([*mini_infer_cmd(), *args], input=stdin, capture_output=True, text=True, timeout=300,
                          env=ENV, cwd=ROOT)


def test_generate_stats(tiny_model):
    r = cli("generate", "Hello", "--model", str(tiny_model), "--max-tokens", "5", "--stats", "--block-size", "4")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Hello") and "time to first token" not in r.stdout      # stdout: the text only
    assert "generated tokens          5" in r.stderr and "time to first token" in r.stderr, r.stderr
    assert "KV blocks at peak" in r.stderr and "finish                    length" in r.stderr
    r = cli("generate", "Hello", "--model", str(tiny_model), "--max-tokens", "5", "--stats", "--json")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out["metrics"]) == METRICS and out["metrics"]["num_generation_tokens"] == len(out["token_ids"])


def test_chat_stats(tiny_model):
    r = cli("chat", "--model", str(tiny_model), "--max-tokens", "4", stdin="/stats\nHi\n/stats\n")
    assert r.returncode == 0, r.stderr
    assert "no reply yet" in r.stdout
    after = r.stdout.split("no reply yet", 1)[1]
    assert "generated tokens          4" in after and "time to first token" in after, r.stdout
    assert "Traceback" not in r.stderr
