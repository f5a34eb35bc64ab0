"""Shared fixtures: a real `mini-infer serve` process on a free loopback port, its log in pytest's temporary
directory (removed when the server stops, so no test run leaves log files behind)."""
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
SERVING = "mini-infer: serving "                       # printed once the port is bound


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mini_infer_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("mini-infer")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from mini_infer.cli import main; raise SystemExit(main())"]


class Server:
    "A `mini-infer serve` subprocess; `url` is its base URL, `log()` what it printed until `stop()` removes it."

    def __init__(self, *args: str, log_dir: Path, port: int | None = None, wait: bool = True):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"mini-infer-serve-{self.port}.log"
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen([*mini_infer_cmd(), "serve", "--port", str(self.port), *args], env=ENV,
                                     cwd=ROOT, stdout=self.log_file, stderr=subprocess.STDOUT)
        if wait:
            self.wait_healthy()

    def wait_healthy(self, timeout: float = 180) -> None:
        deadline = time.time() + timeout
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
        raise RuntimeError("server did not become healthy")

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self, timeout: float = 30) -> int:
        "SIGTERM (a graceful shutdown), SIGKILL if it hangs; the exit status. The log file is removed."
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        self.log_path.unlink(missing_ok=True)
        return self.proc.returncode


API_KEY = "test-key-123"


@pytest.fixture(scope="session")
def serve_logs(tmp_path_factory) -> Path:
    "Where the servers of this run write their logs (pytest's temporary directory)."
    return tmp_path_factory.mktemp("serve-logs")


@pytest.fixture(scope="session")
def server(serve_logs):
    s = Server("--api-key", API_KEY, "--max-num-batched-tokens", "512", log_dir=serve_logs)
    yield s
    s.stop()
