"""Shared plumbing of the CPU benchmarks: threads, quiet loading, result JSON, text tables."""
import datetime
import json
import os
import subprocess
import time
from pathlib import Path

import torch

DEVICE = "cpu-2core"
NUM_THREADS = 2
RESULTS = Path(__file__).resolve().parent / "results"
_START = {}


def setup() -> str:
    "Fix torch's threads, keep transformers offline and quiet; return the environment line."
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(NUM_THREADS)
    _START.update(wall=time.perf_counter(), cpu=time.process_time(), load=os.getloadavg()[0])
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from mini_infer.testing import env_report
    return env_report()


def cpu_share() -> dict:
    "CPU seconds this process got per wall second per thread since `setup()` (1.0: two cores all ours), and the load."
    wall, cpu = time.perf_counter() - _START["wall"], time.process_time() - _START["cpu"]
    return {"cpu_share": cpu / (wall * NUM_THREADS), "loadavg_start": _START["load"], "loadavg_end": os.getloadavg()[0]}


def noise_line(share: dict) -> str:
    "One line saying how much of the two cores this run had."
    return (f"noise      : this process got {share['cpu_share']:.0%} of {NUM_THREADS} cores over the run; 1-min load "
            f"average {share['loadavg_start']:.1f} at start, {share['loadavg_end']:.1f} at end (2 cores shared)")


def commit() -> str:
    "The checkout's commit, with `+dirty` when the package's code (mini_infer/) differs from it."
    git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=RESULTS.parent).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "mini_infer")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def save_run(name: str, run: dict) -> Path:
    "Append one run to benchmarks/results/<device>_<name>_<date>.json (every run of the day is kept)."
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{DEVICE}_{name}_{datetime.date.today().isoformat()}.json"
    data = json.loads(path.read_text()) if path.exists() else {"benchmark": name, "device": DEVICE, "runs": []}
    run = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit(), **run}
    data["runs"].append(run)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def print_table(header: list[str], rows: list[list]) -> None:
    "Print a small fixed-width text table."
    cells = [header] + [[f"{c:,.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) if k and i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
