"""Where one engine step's time goes: the throughput workload, stepped by hand, with torch.profiler on a decode step.

Run: .venv/bin/python benchmarks/profile_step.py [--max-num-batched-tokens 2048]
"""
import argparse
import contextlib
import io
import time

import torch
from torch.profiler import ProfilerActivity, profile

import mini_infer.engine.llm_engine as llm_engine
import mini_infer.engine.model_runner as model_runner
from common import NUM_THREADS, setup
from cpu_throughput import make_requests
from mini_infer import LLM, SamplingParams

STAGES = {}


def timed(module, name: str, stage: str) -> None:
    "Replace module.name by a wrapper adding its wall time to STAGES[stage]."
    fn = getattr(module, name)

    def wrapper(*args, **kw):
        t = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            STAGES[stage] = STAGES.get(stage, 0.0) + time.perf_counter() - t
    setattr(module, name, wrapper)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    a = p.parse_args()
    env = setup()
    with contextlib.redirect_stderr(io.StringIO()):
        llm = LLM(max_num_batched_tokens=a.max_num_batched_tokens)
    e = llm.engine
    timed(model_runner, "prepare_inputs", "prepare_inputs")
    timed(llm_engine, "append_token", "append_token (stop checks, detokenize)")
    for obj, name, stage in ((e.scheduler, "schedule", "schedule"), (e.model, "forward", "model forward"),
                             (e.model, "compute_logits", "lm_head (compute_logits)"), (e.runner, "sampler", "sampler"),
                             (e.block_manager, "cache_full_blocks", "cache_full_blocks")):
        timed(obj, name, stage)
    prompts, output_lens = make_requests(32, llm.config.vocab_size)
    for i, (pr, n) in enumerate(zip(prompts, output_lens)):
        e.add_request(str(i), pr, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    rows, t_all = [], time.perf_counter()
    while e.has_unfinished_requests():
        e._drain_inbox()
        plan_tokens = len(e.scheduler.running)
        t = time.perf_counter()
        e.step()
        rows.append((time.perf_counter() - t, plan_tokens))
    total = time.perf_counter() - t_all
    print(f"environment: {env} (torch.set_num_threads({NUM_THREADS}))")
    print(f"{len(rows)} steps, {total:.1f} s; time per stage (wrapped functions, summed over steps):")
    for stage, s in sorted(STAGES.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:40s} {s:7.2f} s  {100 * s / total:5.1f} %")
    for i, (pr, n) in enumerate(zip(prompts, output_lens)):                                 # a steady decode batch
        e.add_request(f"d{i}", pr, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True))
    while len(e.scheduler.waiting) or any(s.num_computed_tokens < s.num_prompt_tokens for s in e.scheduler.running):
        e.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        for _ in range(3):
            e.step()
        dt = (time.perf_counter() - t) / 3
    print(f"\ndecode step, batch {len(e.scheduler.running)}: {1000 * dt:.0f} ms; top ops by self CPU time (3 steps)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=40))
    while e.has_unfinished_requests():
        e.step()


if __name__ == "__main__":
    main()
