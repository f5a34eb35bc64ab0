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


def make_tiny_model(path: Path, seed: int = 0, **overrides) -> Path:
    """A checkpoint directory of a tiny random Llama that speaks SmolLM2's tokenizer (vocabulary 49152, chat
    template and special tokens from the bundled GGUF): real text in and out, a forward of a few milliseconds."""
    import json

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from mini_infer.engine.tokenizer import Tokenizer
    from mini_infer.testing import tiny_config
    from mini_infer.weights import bundled_model_path

    path.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_gguf(bundled_model_path())
    config = tiny_config("llama", vocab_size=tok.vocab_size, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, **overrides)
    torch.manual_seed(seed)
    LlamaForCausalLM(LlamaConfig(**config)).save_pretrained(path, safe_serialization=True)
    (path / "config.json").write_text(json.dumps(config, indent=1))
    tok.backend.save(str(path / "tokenizer.json"))
    special = tok.special_tokens
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": special.get("bos_token"), "eos_token": special.get("eos_token"),
         "chat_template": tok.chat_template}, indent=1))
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    "A tiny random Llama checkpoint directory with SmolLM2's tokenizer (see `make_tiny_model`)."
    return make_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
