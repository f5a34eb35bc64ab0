"""The quantized-KV decode benchmark (benchmarks/gpu/kv_quant_decode.py, chapter 43a) in its CPU smoke mode, and the
CLI's message for a KV cache dtype the Triton kernels cannot read.

The script runs on the H200 image; `--smoke` runs the same code on tiny shapes under TRITON_INTERPRET=1, so this
test checks that it runs, that its correctness checks pass (write kernel against the codec, decode kernel against
the reference path) and that it appends a run to its JSON file instead of overwriting it.
"""
import json
import subprocess
import sys

from conftest import ENV, ROOT, mini_infer_cmd


def test_smoke_appends_runs(tmp_path):
    cmd = [sys.executable, str(ROOT / "benchmarks/gpu/kv_quant_decode.py"), "--smoke", "--out", str(tmp_path)]
    for _ in range(2):
        r = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (path,) = tmp_path.glob("cpu-smoke_kv_quant_decode_*.json")
    runs = json.loads(path.read_text())["runs"]
    assert len(runs) == 2 and all(run["smoke"] for run in runs)
    rows = runs[-1]["correctness"]
    assert {r["kv"] for r in rows} == {"fp8", "turbo4", "turbo3"}
    assert all(r["codes_equal"] == 1.0 and r["float32_max_diff"] <= 1e-5 for r in rows), rows
    assert {r["kv"] for r in runs[-1]["timing"]} == {"bf16", "fp8", "turbo4", "turbo3"}
    assert {r["kv"] for r in runs[-1]["write"]} == {"fp8", "turbo4", "turbo3"}


def test_cli_refuses_qjl_with_triton_kernels():
    env = {**ENV, "TRITON_INTERPRET": "1"}
    r = subprocess.run(mini_infer_cmd() + ["generate", "--kv-cache-dtype", "turbo3_qjl", "--kernels", "triton",
                                           "--max-tokens", "1", "hi"], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "QJL" in r.stderr and "turbo3_qjl" in r.stderr, r.stderr[-2000:]
