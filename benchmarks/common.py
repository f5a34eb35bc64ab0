"""Shared plumbing of the CPU benchmarks: threads, quiet loading, result JSON, text tables."""
import datetime
import json
import os
from pathlib import Path

import torch

DEVICE = "cpu-2core"
NUM_THREADS = 2
RESULTS = Path(__file__).resolve().parent / "results"


def setup() -> str:
    "Fix torch's threads, keep transformers offline and quiet; return the environment line."
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(NUM_THREADS)
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from mini_infer.testing import env_report
    return env_report()


def save_run(name: str, run: dict) -> Path:
    "Append one run to benchmarks/results/<device>_<name>_<date>.json (every run of the day is kept)."
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{DEVICE}_{name}_{datetime.date.today().isoformat()}.json"
    data = json.loads(path.read_text()) if path.exists() else {"benchmark": name, "device": DEVICE, "runs": []}
    run = {"time": datetime.datetime.now().isoformat(timespec="seconds"), **run}
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
