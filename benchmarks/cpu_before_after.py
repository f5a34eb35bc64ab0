"""One change measured against the tree before it, in the same run: the package at OLD (a commit) and the
working tree, alternating ABBA, each in a fresh process. Two workloads: the throughput workload's 32 requests
on the bundled SmolLM2 (mini_infer alone), and the host cost of a step (a 1-layer tiny Qwen3, 128 sequences
x 64 decode tokens, where the forward is cheap and the serving core's Python dominates).

Run: .venv/bin/python benchmarks/cpu_before_after.py OLD [--rounds 2]      (e.g. OLD = 2de5bd0)
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from common import NUM_THREADS, print_table, save_run

ROOT = Path(__file__).resolve().parent.parent

WORKER = r'''
import cProfile, json, pstats, sys, tempfile, time
import torch
torch.set_num_threads(NUM_THREADS)
from mini_infer import LLM, SamplingParams
sys.path.insert(0, BENCH)
from cpu_throughput import make_requests
out = {}
llm = LLM()
prompts, lens = make_requests(32, llm.config.vocab_size)
params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lens]
llm.generate(prompts[:2], params[:2])
t = time.perf_counter(); llm.generate(prompts, params); s = time.perf_counter() - t
out["smollm2_tok_s"] = sum(lens) / s
from mini_infer.oracle import hf_tiny_model, save_tiny
cfg = dict(model_type="qwen3", vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
tiny = LLM(str(save_tiny(hf_tiny_model(cfg), tempfile.mkdtemp())), max_num_seqs=128, num_kv_blocks=2048)
e, B = tiny.engine, 128
def run(tag):
    for i in range(B):
        e.add_request(f"{tag}{i}", [(7 * i + j) % 250 + 3 for j in range(8 + i % 5)],
                      SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
    if hasattr(e, "_drain_inbox"): e._drain_inbox()
    steps = 0
    while e.has_unfinished_requests():
        e.step(); steps += 1
    return steps
run("w")
t = time.perf_counter(); steps = run("a"); out["tiny_ms_per_step"] = 1000 * (time.perf_counter() - t) / steps
pr = cProfile.Profile(); pr.enable(); steps = run("b"); pr.disable()
out["tiny_calls_per_seq_step"] = pstats.Stats(pr).total_calls / (steps * B)
print(json.dumps(out))
'''


def run_tree(src: Path) -> dict:
    "One fresh process importing mini_infer from `src`; its measurements."
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    code = WORKER.replace("NUM_THREADS", str(NUM_THREADS)).replace("BENCH", repr(str(ROOT / "benchmarks")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=src)
    if r.returncode != 0:
        raise SystemExit(f"the run in {src} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", help="the commit before the change")
    p.add_argument("--rounds", type=int, default=2, help="ABBA rounds; the best of each tree is reported")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", a.old, "mini_infer"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        tar = Path(tmp) / "old.tar"
        tar.write_bytes(archive)
        with tarfile.open(tar) as t: t.extractall(tmp, filter="data")
        trees = {"old": Path(tmp), "new": ROOT}
        results = {"old": [], "new": []}
        for i in range(a.rounds):
            for name in (["old", "new"] if i % 2 == 0 else ["new", "old"]):
                results[name].append(run_tree(trees[name]))
                print(name, results[name][-1], flush=True)
    best = {n: {"smollm2_tok_s": max(r["smollm2_tok_s"] for r in rs),
                "tiny_ms_per_step": min(r["tiny_ms_per_step"] for r in rs),
                "tiny_calls_per_seq_step": min(r["tiny_calls_per_seq_step"] for r in rs)}
            for n, rs in results.items()}
    rows = [[k, f"{best['old'][k]:.2f}", f"{best['new'][k]:.2f}", f"{best['new'][k] / best['old'][k]:.3f}"]
            for k in best["old"]]
    print_table(["measure", f"old ({a.old})", "new", "new/old"], rows)
    print(f"load average {os.getloadavg()[0]:.1f} (2 cores shared: compare ratios, not absolute numbers)")
    path = save_run("before_after", {"old": a.old, "rounds": results, "best": best,
                                     "loadavg_end": os.getloadavg()[0],
                                     "command": f"python benchmarks/cpu_before_after.py {a.old}"})
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
