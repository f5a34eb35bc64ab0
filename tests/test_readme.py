"""The README's examples are executed: the curl and openai-client snippets against a real server, and the offline one."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ENV, ROOT, Server

README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


@pytest.fixture(scope="module")
def plain_server(serve_logs):
    s = Server(log_dir=serve_logs)     # no key, like `make serve`
    yield s
    s.stop()


def test_readme_quickstart_has_two_setup_commands():
    first = blocks("bash")[0]
    assert [l.split()[0:2] for l in first.strip().splitlines()] == [["make", "serve"], ["make", "test"]]


def test_readme_curl_example(plain_server):
    curl = next(b for b in blocks("bash") if b.startswith("curl"))
    out = subprocess.run(["bash", "-c", curl.replace("127.0.0.1:8000", f"127.0.0.1:{plain_server.port}")],
                         capture_output=True, text=True, timeout=120)
    body = json.loads(out.stdout)
    assert "Paris" in body["choices"][0]["message"]["content"], body


def test_readme_openai_client_example(plain_server):
    code = next(b for b in blocks("python") if "from openai import OpenAI" in b)
    code = code.replace("127.0.0.1:8000", f"127.0.0.1:{plain_server.port}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert out.returncode == 0 and "Paris" in out.stdout, out.stderr


def test_readme_offline_example():
    code = next(b for b in blocks("python") if "from mini_infer import LLM" in b)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=ENV, cwd=ROOT)
    assert out.returncode == 0 and "Paris" in out.stdout, out.stderr
