"""The decode sweep (benchmarks/gpu/decode_sweep.py, issue 23 item 4) in its CPU smoke mode: it runs, its rows carry
the step time and the roofline of weights + K/V bytes, and its run is appended to the day's JSON file instead of
replacing the runs recorded there."""
import datetime
import json
import subprocess
import sys

from conftest import ENV, ROOT


def test_smoke_runs_and_appends(tmp_path):
    day = datetime.date.today().isoformat()
    earlier = tmp_path / f"cpu-2core_decode_sweep_smoke_{day}.json"
    earlier.write_text(json.dumps({"runs": [{"smoke": True, "rows": "an earlier run"}]}))
    cmd = [sys.executable, str(ROOT / "benchmarks/gpu/decode_sweep.py"), "--smoke", "--compare-fused", "--out",
           str(tmp_path)]
    proc = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = json.loads(earlier.read_text())["runs"]
    assert len(runs) == 2 and runs[0]["rows"] == "an earlier run" and runs[1]["smoke"]
    rows = runs[-1]["rows"]
    assert {(r["batch"], r["context"]) for r in rows} == {(1, 32), (4, 32), (1, 64), (4, 64)}
    for r in rows:
        assert r["ms_per_step"] > 0 and r["roofline_ms"] > 0, r
        assert r["fraction_of_roofline"] == r["roofline_ms"] / r["ms_per_step"], r
    by = {(r["batch"], r["context"]): r for r in rows}
    assert by[(4, 64)]["kv_GB"] == 8 * by[(1, 32)]["kv_GB"]          # K/V bytes grow with B * ctx
    assert "fraction_of_roofline" in proc.stdout
    fused = runs[-1]["compare_fused"]                       # on, off, on: both layers hooked when on
    assert [r["fused_rope_store"] for r in fused] == [True, False, True], fused
    assert [r["layers_fused"] for r in fused] == [2, 0, 2] and all(r["graph_ms"] > 0 for r in fused)
