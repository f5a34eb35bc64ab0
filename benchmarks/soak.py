"""Soak and load: a mixed, misbehaving client population against a running `mini-infer serve`, then an audit.

Clients (asyncio + httpx) send completions and chats with random prompt and output lengths, `n`, stop strings,
streaming or not; a share cancel (a stream closed after a few chunks, or a non-streamed request whose client gives
up) and a share send bad requests. Afterwards the audit checks what the server must keep true:
zero 5xx; every non-cancelled temperature-0 request equal to the same request served alone (replayed one at a
time after the load); no request left running or waiting; every KV block free or cached; resident memory flat
(slope per 1,000 requests); `/metrics` counters consistent with what the clients counted.

    python benchmarks/soak.py --minutes 30                      # starts its own server (bundled SmolLM2)
    python benchmarks/soak.py --url http://127.0.0.1:8000 --minutes 3 --api-key KEY

`tests/test_reliability.py` runs the same `soak()` for a few minutes against a tiny model in CI."""
import argparse
import asyncio
import json
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

WORDS = ("the of and a to in is you that it he was for on are as with his they at be this have from or one "
         "had by word but not what all were we when your can said there use an each which she do how their if "
         "will up other about out many then them these so some her would make like him into time has look two "
         "more write go see number no way could people my than first water been call who oil its now find "
         "Paris France capital river city 1 2 3 42 ! ? , . : ; é ü 中 文 🙂").split()

BAD_REQUESTS = [  # (route, body or raw bytes, headers override, expected status)
    ("/v1/completions", {"prompt": "hi", "max_tokens": -1}, None, 400),
    ("/v1/completions", {"prompt": "hi", "temperature": "hot"}, None, 400),
    ("/v1/completions", {"prompt": "", "max_tokens": 4}, None, 400),
    ("/v1/completions", {"model": "no-such-model", "prompt": "hi"}, None, 404),
    ("/v1/completions", b"{not json", None, 400),
    ("/v1/completions", {"prompt": "hi", "n": 10**6, "temperature": 1}, None, 400),
    ("/v1/completions", {"prompt": [10**9], "max_tokens": 4}, None, 400),
    ("/v1/chat/completions", {"messages": []}, None, 400),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, None, 400),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, {"authorization": "Bearer x"}, 401),
    ("/v1/completions", {"prompt": "hi", "seed": 2**64}, None, 400),
    ("/v1/completions", {"prompt": "hi", "stop": [""]}, None, 400),
]


def metrics(url: str) -> dict[str, float]:
    "The server's `mini_infer:` gauges and counters, by name."
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^mini_infer:(\w+) (\S+)$", text, re.M)}


def rss_mb(pid: int) -> float:
    "Resident memory of process `pid` in MiB (Linux)."
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def slope_per_1000(points: list[tuple[int, float]]) -> float:
    "Least-squares slope of RSS (MiB) against requests served, per 1,000 requests, after the first fifth."
    pts = points[len(points) // 5:]
    if len(pts) < 3 or pts[-1][0] == pts[0][0]:
        return 0.0
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0


def make_request(rng: random.Random, model: str) -> tuple[str, dict, bool]:
    "(route, body, cancel?) of one good request."
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60)))
    greedy = rng.random() < 0.5
    body = {"model": model, "max_tokens": rng.randint(1, 48), "stream": rng.random() < 0.5,
            "temperature": 0 if greedy else rng.choice([0.7, 1.0]), "seed": rng.randint(0, 2**31)}
    if not greedy:
        body["n"] = rng.choice([1, 1, 2, 3])
    if rng.random() < 0.3:
        body["stop"] = rng.sample(WORDS[:40], rng.randint(1, 3))
    if rng.random() < 0.5:
        route, body["prompt"] = "/v1/completions", text
    else:
        route, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": text}]
    return route, body, rng.random() < 0.1


def texts_of(route: str, chunks: list[dict]) -> dict[int, str]:
    "Each choice's text, from one response body or the chunks of a stream."
    out: dict[int, str] = {}
    for c in chunks:
        for ch in c.get("choices", []):
            part = ch.get("text") if route == "/v1/completions" else (
                (ch.get("delta") or ch.get("message") or {}).get("content"))
            out[ch["index"]] = out.get(ch["index"], "") + (part or "")
    return out


async def send(client: httpx.AsyncClient, route: str, body: dict, cancel: bool, rng: random.Random) -> dict:
    "Send one request; {'status', 'texts', 'cancelled', 'latency', 'completion_tokens'}."
    t0 = time.perf_counter()
    try:
        if body.get("stream"):
            chunks = []
            async with client.stream("POST", route, json=body) as r:
                if r.status_code != 200:
                    await r.aread()
                    return {"status": r.status_code, "body": r.text[:300], "latency": time.perf_counter() - t0}
                keep = rng.randint(1, 4) if cancel else None
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunks.append(json.loads(line[6:]))
                        if "error" in chunks[-1]:
                            return {"status": 500, "body": line[:300], "latency": time.perf_counter() - t0}
                        if keep is not None and len(chunks) >= keep:
                            return {"status": 200, "cancelled": True}          # the client hangs up
            return {"status": 200, "texts": texts_of(route, chunks), "latency": time.perf_counter() - t0}
        timeout = rng.uniform(0.02, 0.3) if cancel else None
        r = await client.post(route, json=body, **({"timeout": timeout} if timeout else {}))
        if r.status_code != 200:
            return {"status": r.status_code, "body": r.text[:300], "latency": time.perf_counter() - t0}
        data = r.json()
        return {"status": 200, "texts": texts_of(route, [data]), "latency": time.perf_counter() - t0,
                "completion_tokens": data["usage"]["completion_tokens"]}
    except httpx.TimeoutException:
        if cancel:
            return {"status": 200, "cancelled": True}
        raise


async def soak(url: str, api_key: str | None, model: str, seconds: float, pid: int | None = None,
               concurrency: int = 16, seed: int = 0, bad_share: float = 0.1, replay: int = 40) -> dict:
    "Run the load for `seconds`, then the audit; a report dict (`problems` lists every broken rule)."
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    before = metrics(url)
    stats = {"ok": 0, "cancelled": 0, "bad": 0, "by_status": {}, "latencies": [], "server_errors": [],
             "unexpected": [], "completion_tokens": 0}
    greedy: list[tuple[str, dict, dict]] = []        # (route, body, texts) of finished temperature-0 requests
    rss: list[tuple[int, float]] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)

    async def worker(k: int, client: httpx.AsyncClient):
        rng = random.Random(seed * 1000 + k)
        while time.monotonic() < deadline:
            if rng.random() < bad_share:
                route, body, hdr, want = rng.choice(BAD_REQUESTS)
                kw = {"content": body} if isinstance(body, bytes) else {"json": body}
                r = await client.post(route, headers={**headers, **(hdr or {}), "content-type": "application/json"},
                                      **kw)
                stats["bad"] += 1
                stats["by_status"][r.status_code] = stats["by_status"].get(r.status_code, 0) + 1
                if r.status_code >= 500:
                    stats["server_errors"].append((route, str(body)[:100], r.status_code, r.text[:200]))
                elif r.status_code != want:
                    stats["unexpected"].append((route, str(body)[:100], r.status_code, want))
                continue
            route, body, cancel = make_request(rng, model)
            res = await send(client, route, body, cancel, rng)
            stats["by_status"][res["status"]] = stats["by_status"].get(res["status"], 0) + 1
            if res["status"] >= 500:
                stats["server_errors"].append((route, str(body)[:100], res["status"], res.get("body")))
            elif res.get("cancelled"):
                stats["cancelled"] += 1
            elif res["status"] == 200:
                stats["ok"] += 1
                stats["latencies"].append(res["latency"])
                stats["completion_tokens"] += res.get("completion_tokens", 0)
                if body["temperature"] == 0 and len(greedy) < replay:
                    greedy.append((route, body, res["texts"]))
            elif res["status"] != 429:                    # a full queue is a fair answer under load
                stats["unexpected"].append((route, str(body)[:100], res["status"], res.get("body")))

    async def sampler():
        while time.monotonic() < deadline:
            if pid is not None:
                rss.append((stats["ok"] + stats["cancelled"] + stats["bad"], rss_mb(pid)))
            await asyncio.sleep(2)

    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
        await asyncio.gather(sampler(), *(worker(k, client) for k in range(concurrency)))
    wall = time.perf_counter() - t0

    # The audit: the engine settles (aborts of hung-up clients land within a step), then the rules.
    for _ in range(300):
        m = metrics(url)
        if m["num_requests_running"] == 0 and m["num_requests_waiting"] == 0:
            break
        await asyncio.sleep(0.1)
    after = metrics(url)
    problems = [f"{len(stats['server_errors'])} responses were 5xx: {stats['server_errors'][:3]}"] \
        if stats["server_errors"] else []
    if stats["unexpected"]:
        problems.append(f"{len(stats['unexpected'])} unexpected statuses: {stats['unexpected'][:3]}")
    if after["num_requests_running"] or after["num_requests_waiting"]:
        problems.append(f"requests left in the engine: running {after['num_requests_running']:.0f}, "
                        f"waiting {after['num_requests_waiting']:.0f}")
    if after["kv_blocks_free"] != after["kv_blocks_total"]:
        problems.append(f"KV blocks not returned: {after['kv_blocks_free']:.0f} free of "
                        f"{after['kv_blocks_total']:.0f}")
    finished = after["requests_finished_total"] - before["requests_finished_total"]
    if not stats["ok"] <= finished <= stats["ok"] + stats["cancelled"]:
        problems.append(f"requests_finished grew by {finished:.0f}; the clients saw {stats['ok']} finish "
                        f"and cancelled {stats['cancelled']}")
    generated = after["generation_tokens_total"] - before["generation_tokens_total"]
    if generated < stats["completion_tokens"]:
        problems.append(f"generation_tokens grew by {generated:.0f} < {stats['completion_tokens']} the "
                        "unstreamed responses' usage reports alone")
    mismatches = 0
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        for route, body, texts in greedy:                   # each one again, alone
            alone = await send(client, route, {**body, "stream": False}, False, random.Random(0))
            if alone.get("texts") != texts:
                mismatches += 1
                if mismatches <= 3:
                    problems.append(f"temperature 0 under load differs from alone: {body} -> {texts!r} vs "
                                    f"{alone.get('texts')!r}")
    lat = sorted(stats["latencies"])
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None          # noqa: E731
    return {"seconds": round(wall, 1), "concurrency": concurrency, "requests": stats["ok"] + stats["cancelled"]
            + stats["bad"] + stats["by_status"].get(429, 0), "ok": stats["ok"], "cancelled": stats["cancelled"],
            "bad": stats["bad"], "by_status": {str(k): v for k, v in sorted(stats["by_status"].items())},
            "preemptions": after["num_preemptions_total"] - before["num_preemptions_total"],
            "p50_latency_s": pct(0.5), "p99_latency_s": pct(0.99), "replayed_greedy": len(greedy),
            "greedy_mismatches": mismatches, "rss_mb_start": rss[0][1] if rss else None,
            "rss_mb_end": rss[-1][1] if rss else None, "rss_slope_mb_per_1000": slope_per_1000(rss),
            "problems": problems}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (default: start one)")
    ap.add_argument("--model", help="--model for the server this starts (default: the bundled SmolLM2)")
    ap.add_argument("--served-model-name", default="soak")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--num-kv-blocks", type=int, default=64, help="small, so that preemption happens")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    proc = None
    url, pid = args.url, None
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from conftest import free_port, mini_infer_cmd
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [*mini_infer_cmd(), "serve", "--port", str(port), "--served-model-name", args.served_model_name,
               "--num-kv-blocks", str(args.num_kv_blocks), "--max-queue", "64",
               *(["--model", args.model] if args.model else []), *(["--api-key", args.api_key] if args.api_key else [])]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = proc.pid
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
    try:
        report = asyncio.run(soak(url, args.api_key, args.served_model_name, args.minutes * 60, pid,
                                  args.concurrency, args.seed))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    print(json.dumps(report, indent=1))
    from common import save_run
    print("saved to", save_run("soak", {"command": " ".join(["python", "benchmarks/soak.py", *(argv or sys.argv[1:])]),
                                         "model": args.model or "bundled SmolLM2", **report}))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
