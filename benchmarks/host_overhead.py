"""The engine's own host time per decode step, on a model whose compute is negligible (1 layer, hidden 64).

Batch 1 and batch 32 decode steps of greedy requests with SmolLM2's tokenizer (so detokenizing is real), timed
in CPU seconds of this thread (the machine is shared: wall time would count other processes) per phase:
schedule, input building (prepare_inputs), the model forward and LM head (model compute, not host overhead),
the sampler, postprocess (append, stop checks, detokenize, stream outputs), and the rest of `step`.

Run: .venv/bin/python benchmarks/host_overhead.py [--steps 300] [--profile]
"""
import argparse
import contextlib
import cProfile
import io
import json
import pstats
import tempfile
import time

import torch

import mini_infer.engine.model_runner as model_runner
from common import cpu_share, noise_line, print_table, save_run, setup
from mini_infer import LLM, SamplingParams
from mini_infer.engine.tokenizer import Tokenizer
from mini_infer.oracle import hf_tiny_model, save_tiny
from mini_infer.testing import tiny_config
from mini_infer.weights import bundled_model_path

PHASES = ("schedule", "prepare_inputs", "model forward + lm_head", "sampler", "postprocess")


def tiny_engine(folder: str, **options) -> LLM:
    """A 1-layer, hidden-64 random Llama over the first 2,048 ids of SmolLM2's tokenizer (saved beside
    it), so that the LM head and the sampler cost little and the detokenizer is real."""
    tok = Tokenizer.from_gguf(bundled_model_path())
    cfg = tiny_config("llama", num_hidden_layers=1, hidden_size=64, intermediate_size=128,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                      vocab_size=2048, max_position_embeddings=4096)
    path = save_tiny(hf_tiny_model(cfg), f"{folder}/tiny")
    tok.backend.save(f"{path}/tokenizer.json")
    with open(f"{path}/tokenizer_config.json", "w") as f:
        json.dump(tok.special_tokens, f)
    return LLM(path, **options)


class PhaseClock:
    "Wall time per phase: wraps the engine's and runner's callables on their instances (this process only)."

    def __init__(self, e):
        self.s, self.saved = dict.fromkeys(PHASES, 0.0), []
        self.wrap(e, "schedule", "schedule")
        self.wrap(model_runner, "prepare_inputs", "prepare_inputs")
        self.wrap(e.model, "forward", "model forward + lm_head")
        self.wrap(e.model, "compute_logits", "model forward + lm_head")
        self.wrap(e.runner, "sampler", "sampler")
        self.wrap(e, "postprocess", "postprocess")

    def wrap(self, owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)
        self.saved.append((owner, name, owner.__dict__.get(name)))

        def timed(*a, **kw):
            t = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                self.s[phase] += time.thread_time() - t
        setattr(owner, name, timed)

    def undo(self) -> None:
        "Put back what `wrap` replaced (drop the instance attribute where there was none)."
        for owner, name, old in reversed(self.saved):
            if old is None:
                delattr(owner, name)
            else:
                setattr(owner, name, old)


def decode_steps(llm: LLM, batch: int, steps: int, clock: PhaseClock | None = None,
                 prof: cProfile.Profile | None = None) -> float:
    "CPU seconds per decode step at `batch` running greedy requests (prefill excluded)."
    e = llm.engine
    for i in range(batch):
        e.add_request(f"b{batch}-{i}", list(range(100 + i, 116 + i)),
                      SamplingParams(temperature=0, max_tokens=steps + 8, ignore_eos=True))
    e.step()                                         # the prefill of all of them
    e.step()
    if clock is not None:
        clock.s = dict.fromkeys(PHASES, 0.0)
    if prof is not None:
        prof.enable()
    t = time.thread_time()
    for _ in range(steps):
        e.step()
    dt = (time.thread_time() - t) / steps
    if prof is not None:
        prof.disable()
    while e.has_unfinished_requests():
        e.step()
    for i in range(batch):
        e.request_output(f"b{batch}-{i}")
    return dt


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--profile", action="store_true", help="print cProfile's top functions per batch")
    p.add_argument("--label", default="", help="a word saved with the run (before, after)")
    a = p.parse_args()
    env = setup()
    torch.set_num_threads(1)     # host work is one thread; two threads on a shared machine make every tiny op
    env = env.replace("threads 2", "threads 1")   # wait in OpenMP barriers (seen: SDPA 10 us -> 35 ms)
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stderr(io.StringIO()):
        llm = tiny_engine(folder, max_num_seqs=64)
    decode_steps(llm, 32, 20)                         # warm up
    results, rows = {}, []
    for batch in (1, 32):
        if a.profile:
            prof = cProfile.Profile()
            decode_steps(llm, batch, a.steps, prof=prof)
            print(f"--- batch {batch}: cProfile, top 25 by own time")
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        clock = PhaseClock(llm.engine)
        step = decode_steps(llm, batch, a.steps, clock)
        phases = {k: 1e6 * v / a.steps for k, v in clock.s.items()}
        phases["rest of step"] = 1e6 * step - sum(phases.values())
        host = 1e6 * step - phases["model forward + lm_head"]
        results[f"batch{batch}"] = {"step_us": 1e6 * step, "host_us": host, "phases_us": phases}
        for k in (*PHASES, "rest of step"):
            rows.append([f"batch {batch}", k, phases[k]])
        rows.append([f"batch {batch}", "host (step - model)", host])
        clock.undo()
    share = cpu_share()
    print(f"environment: {env}; {a.steps} decode steps per batch; label {a.label or '-'}")
    print_table(["batch", "phase", "us/step"], rows)
    print(noise_line(share))
    path = save_run("host_overhead", {"env": env, "label": a.label, "steps": a.steps, **share, **results})
    print("saved", path)


if __name__ == "__main__":
    main()
