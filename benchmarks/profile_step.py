"""Where an engine step's time goes: the throughput workload's stages, then torch.profiler on decode and prefill steps.

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
from common import NUM_THREADS, cpu_share, noise_line, save_run, setup
from cpu_throughput import NUM_SPECIAL_IDS, make_requests
from mini_infer import LLM, SamplingParams

STAGES = {}


def timed(owner, name: str, stage: str) -> None:
    "Replace owner.name by a wrapper adding its wall time to STAGES[stage]."
    fn = getattr(owner, name)

    def wrapper(*args, **kw):
        t = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            STAGES[stage] = STAGES.get(stage, 0.0) + time.perf_counter() - t
    setattr(owner, name, wrapper)


def profile_decode(e, num_steps: int = 3) -> dict:
    "Wall ms of a decode step at the current batch, and the top ops by self CPU time."
    t = time.perf_counter()
    for _ in range(num_steps):
        e.step()
    step_ms = 1000 * (time.perf_counter() - t) / num_steps
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(num_steps):
            e.step()
    ops = sorted(prof.key_averages(), key=lambda k: -k.self_cpu_time_total)
    total = sum(k.self_cpu_time_total for k in ops)
    return {"batch": len(e.scheduler.running), "step_ms": step_ms,
            "top_ops": [{"op": k.key, "share": k.self_cpu_time_total / total, "calls_per_step": k.count // num_steps}
                        for k in ops[:8]]}


def profile_prefill(e, prompt: list[int]) -> dict:
    "Wall seconds of one whole-prompt prefill step, and the top ops by self CPU time."
    e.add_request("long", prompt, SamplingParams(temperature=0, max_tokens=1))
    e._drain_inbox()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        e.step()
        step_s = time.perf_counter() - t
    while e.has_unfinished_requests():
        e.step()
    ops = sorted(prof.key_averages(), key=lambda k: -k.self_cpu_time_total)
    total = sum(k.self_cpu_time_total for k in ops)
    return {"prompt_tokens": len(prompt), "step_s": step_s,
            "top_ops": [{"op": k.key, "share": k.self_cpu_time_total / total, "calls_per_step": k.count} for k in ops[:8]]}


def add_and_prefill(e, prompts, max_tokens: int, tag: str) -> None:
    "Add requests and step until every one of them is decoding."
    for i, pr in enumerate(prompts):
        e.add_request(f"{tag}{i}", pr, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
    e._drain_inbox()
    while e.scheduler.waiting or any(s.num_computed_tokens < s.num_prompt_tokens for s in e.scheduler.running):
        e.step()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    a = p.parse_args()
    env = setup()
    with contextlib.redirect_stderr(io.StringIO()):
        llm = LLM(max_num_batched_tokens=a.max_num_batched_tokens)
    e = llm.engine
    prompts, output_lens = make_requests(32, llm.config.vocab_size)
    add_and_prefill(e, prompts[:1], 30, "warmup")
    while e.has_unfinished_requests():
        e.step()
    timed(model_runner, "prepare_inputs", "prepare_inputs")
    timed(llm_engine, "append_token", "append_token (stop checks, detokenize)")
    for owner, name, stage in ((e.scheduler, "schedule", "schedule"), (e.model, "forward", "model forward"),
                               (e.model, "compute_logits", "lm_head (compute_logits)"),
                               (e.runner, "sampler", "sampler"), (e.block_manager, "cache_full_blocks", "cache_full_blocks")):
        timed(owner, name, stage)
    for i, (pr, n) in enumerate(zip(prompts, output_lens)):
        e.add_request(str(i), pr, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    t, split = time.perf_counter(), {"steps with prefill": [0, 0.0], "decode-only steps": [0, 0.0]}
    while e.has_unfinished_requests():
        e._drain_inbox()
        kind = ("steps with prefill" if e.scheduler.waiting or any(s.num_computed_tokens < s.num_prompt_tokens
                                                                   for s in e.scheduler.running) else "decode-only steps")
        t_step = time.perf_counter()
        e.step()
        split[kind][0] += 1
        split[kind][1] += time.perf_counter() - t_step
    total, steps = time.perf_counter() - t, sum(n for n, _ in split.values())
    stages = {**STAGES, "rest of step (postprocess, Python glue)": total - sum(STAGES.values())}
    add_and_prefill(e, prompts, 24, "b32-")
    decode32 = profile_decode(e)
    while e.has_unfinished_requests():
        e.step()
    add_and_prefill(e, prompts[:1], 24, "b1-")
    decode1 = profile_decode(e)
    while e.has_unfinished_requests():
        e.step()
    g = torch.Generator().manual_seed(1)
    prefill = profile_prefill(e, torch.randint(NUM_SPECIAL_IDS, llm.config.vocab_size, (2016,), generator=g).tolist())
    print(f"environment: {env} (torch.set_num_threads({NUM_THREADS}))")
    print(f"throughput workload stepped by hand: {steps} steps, {total:.1f} s; wall time per stage, summed over steps:")
    for stage, s in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:42s} {s:7.2f} s  {100 * s / total:5.1f} %")
    for kind, (n, s) in split.items():
        print(f"  {kind:42s} {s:7.2f} s  {100 * s / total:5.1f} %  ({n} steps)")
    for d in (decode32, decode1):
        print(f"\ndecode step at batch {d['batch']}: {d['step_ms']:.1f} ms; top ops by self CPU time:")
        for o in d["top_ops"]:
            print(f"  {o['op']:28s} {100 * o['share']:5.1f} %  {o['calls_per_step']:5d} calls/step")
    print(f"\nprefill step of {prefill['prompt_tokens']} tokens: {prefill['step_s']:.2f} s; top ops by self CPU time:")
    for o in prefill["top_ops"]:
        print(f"  {o['op']:28s} {100 * o['share']:5.1f} %  {o['calls_per_step']:5d} calls/step")
    share = cpu_share()
    print(noise_line(share))
    path = save_run("profile", {"env": env, "threads": NUM_THREADS, **share, "steps": steps, "total_s": total,
                                "max_num_batched_tokens": a.max_num_batched_tokens, "stages_s": stages,
                                "split": {k: {"steps": n, "s": s} for k, (n, s) in split.items()},
                                "decode_batch32": decode32, "decode_batch1": decode1,
                                "prefill": prefill})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
