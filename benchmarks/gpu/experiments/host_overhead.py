"""Where the host time of a batch-1 decode step goes (CUDA graphs on), and what pinned staging of the decode
buffers saves: the same engine with chapter 24a's `fill_decode_buffers` (pinned mirrors, three queued copies) and
with the earlier version (pageable numpy, five synchronous copies), in one run.

    python benchmarks/gpu/experiments/host_overhead.py [--shape Qwen2.5-0.5B] [--steps 257] [--out DIR]      (H200, ~1 min)

Per step, microseconds of host wall time in: schedule, fill (the buffer copies), replay (the graph launch call),
sampler (argmax launch), run (all of the runner), and after (read back the tokens, which waits for the GPU, and
postprocess); next to the GPU time of one replay (CUDA events) and the step's total.
"""
import argparse
import itertools
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))          # benchmarks/gpu: common.py
from common import config_dir, env, save, table


def pageable_fill(buf, seqs, size, block_size, pad_block):
    "The earlier fill_decode_buffers: numpy arrays in pageable memory, one synchronous copy per buffer."
    p, b = block_size, len(seqs)
    ids, pos, slots, lens = [], [], [], []
    for seq in seqs:
        c = seq.num_computed_tokens
        ids.append(seq.token_ids[c]); pos.append(c); lens.append(c + 1)
        slots.append(seq.block_table[c // p] * p + c % p)
    pad = size - b
    host = torch.from_numpy(np.array([ids + [0] * pad, pos + [0] * pad, slots + [pad_block * p] * pad, lens + [1] * pad]))
    for dst, src in zip((buf.input_ids, buf.positions, buf.slot_mapping, buf.seq_lens), host):
        dst[:size].copy_(src, non_blocking=True)
    lens = np.array([len(seq.block_table) for seq in seqs])
    flat = np.fromiter(itertools.chain.from_iterable(seq.block_table for seq in seqs), np.int32, int(lens.sum()))
    tables = np.full((b, lens.max()), pad_block, dtype=np.int32)
    tables[np.arange(tables.shape[1]) < lens[:, None]] = flat
    buf.block_tables[:b, : tables.shape[1]].copy_(torch.from_numpy(tables), non_blocking=True)
    buf.block_tables[b:size, 0] = pad_block


class Replay:
    def __init__(self, graph, timed): self.graph, self.replay = graph, timed("replay", graph.replay)


def main() -> None:
    from mini_infer import LLM, SamplingParams
    import mini_infer.engine.cuda_graphs as cg
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="Qwen2.5-0.5B")
    ap.add_argument("--steps", type=int, default=257)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    llm = LLM(config_dir(a.shape), dtype="bfloat16", device="cuda", load_format="dummy", max_model_len=2048,
              max_num_seqs=8, num_kv_blocks=1024)
    eng, runner = llm.engine, llm.engine.runner
    acc = defaultdict(float)
    def timed(name, fn):
        def wrapper(*args, **kw):
            t = time.perf_counter(); r = fn(*args, **kw); acc[name] += time.perf_counter() - t; return r
        return wrapper
    eng.scheduler.schedule = timed("schedule", eng.scheduler.schedule)
    runner.sampler = timed("sampler", runner.sampler)
    runner.run = timed("run", runner.run)
    eng.step = timed("step", eng.step)
    runner.graphs = {size: Replay(g, timed) for size, g in runner.graphs.items()}
    g1 = runner.graphs[1].graph
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    g1.replay(); torch.cuda.synchronize()
    ev[0].record(); g1.replay(); ev[1].record(); torch.cuda.synchronize()
    graph_us = ev[0].elapsed_time(ev[1]) * 1e3
    library_fill = cg.fill_decode_buffers
    prompt = list(range(1000, 1016))
    res = {"env": env(), "shape": a.shape, "graph_gpu_us": graph_us, "rows": []}
    for name, fill in (("pinned (library)", library_fill), ("pageable (before)", pageable_fill)):
        cg.fill_decode_buffers = timed("fill", fill)
        params = SamplingParams(temperature=0, max_tokens=a.steps, ignore_eos=True)
        llm.generate([prompt], params); torch.cuda.synchronize()
        acc.clear()
        t = time.perf_counter(); llm.generate([prompt], params); wall = time.perf_counter() - t
        n = a.steps
        row = {"variant": name, **{k: v / n * 1e6 for k, v in acc.items()}, "wall_per_step_us": wall / n * 1e6}
        row["after_us"] = row["step"] - row["schedule"] - row["run"]
        res["rows"].append(row)
        print(row, flush=True)
    cg.fill_decode_buffers = library_fill
    save("host_overhead", res, a.out)
    print(table(["variant", "schedule", "fill", "replay", "sampler", "run", "after", "step", "wall/step", "graph GPU"],
                [[r["variant"], r["schedule"], r["fill"], r["replay"], r["sampler"], r["run"], r["after_us"],
                  r["step"], r["wall_per_step_us"], graph_us] for r in res["rows"]]))
    print("microseconds per decode step (prefill step included once in 'step' and 'wall'); host idle time of the GPU "
          "per step is about wall/step - graph GPU")


if __name__ == "__main__":
    main()
