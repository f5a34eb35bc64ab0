"""Fuzzing the real server from its own OpenAPI document (schemathesis, bounded in time).

The schema states every bound the server enforces (chapter 26), so generated requests pass validation and reach
the engine: the served model is named in the schema's enum, lengths and token ids have their real ranges. The
checks are schemathesis' own: no 5xx, every status code and content type the schema lists, every body valid
against its response model (SSE events included). A tiny random Llama with SmolLM2's tokenizer serves, so that
thousands of requests fit in the budget."""
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import API_KEY, Server

BUDGET_S = 60                                        # schemathesis' --max-time; the whole test stays under 2 min
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


@pytest.fixture(scope="module")
def fuzz_server(tiny_model, serve_logs):
    s = Server("--model", str(tiny_model), "--served-model-name", "tiny", "--api-key", API_KEY,
               "--max-model-len", "128", "--max-queue", "16", "--request-timeout", "30", log_dir=serve_logs)
    yield s
    s.stop()


def st_command() -> list[str]:
    exe = Path(sys.executable).with_name("st")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "schemathesis.cli"]


def finished_requests(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return float(re.search(r"^mini_infer:requests_finished_total (\S+)$", text, re.M).group(1))


def test_schemathesis_finds_no_failure(fuzz_server, tmp_path):
    before = finished_requests(fuzz_server.url)
    cmd = [*st_command(), "run", f"{fuzz_server.url}/openapi.json", "-H", f"Authorization: Bearer {API_KEY}",
           "--checks", CHECKS, "--max-time", str(BUDGET_S), "--seed", "2", "--request-timeout", "30",
           "--generation-database", "none", "--generation-codec", "utf-8", "--no-color"]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=BUDGET_S + 120)
    summary = run.stdout[-6000:]
    assert run.returncode == 0, f"schemathesis found failures:\n{summary}\n{run.stderr[-2000:]}"
    passed = int(re.search(r"(\d+) generated, (\d+) passed", summary).group(2))
    served = finished_requests(fuzz_server.url) - before
    print(summary[-1500:])
    print(f"schemathesis: {passed} cases passed; {served:.0f} requests reached the engine and finished")
    assert passed >= 200, summary                 # it really explored (1,900 cases in 60 s on an idle machine)
    assert served >= 10, f"only {served} generated requests reached the engine:\n{summary}"
    assert httpx.get(f"{fuzz_server.url}/health", timeout=10).status_code == 200
