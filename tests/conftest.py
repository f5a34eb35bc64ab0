"""Shared fixtures: a real `mini-infer serve` process on a free loopback port."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MINI_INFER_THREADS": "1", "HF_HUB_OFFLINE": "1",
       "TOKENIZERS_PARALLELISM": "false"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mini_infer_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("mini-infer")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from mini_infer.cli import main; raise SystemExit(main())"]


class Server:
    "A `mini-infer serve` subprocess; `url` is its base URL, `log()` what it printed."

    def __init__(self, *args: str, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("PYTEST_TMPDIR", "/tmp")) / f"mini-infer-serve-{self.port}.log"
        self.proc = subprocess.Popen([*mini_infer_cmd(), "serve", "--port", str(self.port), *args], env=ENV, cwd=ROOT,
                                     stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"server did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


API_KEY = "test-key-123"


@pytest.fixture(scope="session")
def server():
    s = Server("--api-key", API_KEY, "--max-num-batched-tokens", "512")
    yield s
    s.stop()
