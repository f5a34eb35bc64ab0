"""Speculative decoding on the bundled SmolLM2, CPU: ngram and layer_skip against no speculation, same run.

Two tasks: input-grounded (repeat or rewrite a given passage) and open-ended chat. Greedy; each setting's outputs
are checked token-identical to the run without speculation. Prints acceptance rate, mean accepted length (tokens
emitted per verification), the proposer's share of the time and tokens per wall second and per CPU second of this
process (single-threaded with --threads 1: robust to other processes on a shared machine) against no speculation
measured in the same process, and appends the run to benchmarks/results/cpu-2core_speculative_<date>.json.
Run: .venv/bin/python benchmarks/cpu_speculative.py [--prompts 2 --tokens 64 --k 3 --layers 8]
"""
import argparse
import contextlib
import io
import time

import torch
from common import NUM_THREADS, cpu_share, noise_line, print_table, save_run, setup
from mini_infer import LLM, SamplingParams

PASSAGE = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
           "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. "
           "Locally nicknamed the Iron Lady, it was constructed as the centrepiece of the 1889 World's Fair.")
TASKS = {"rewrite": [f"Repeat the following passage exactly, word for word.\n\n{PASSAGE}",
                     f"Summarize this passage in two sentences, keeping its words.\n\n{PASSAGE}"],
         "chat": ["Tell me a short story about a robot.", "What should I cook tonight?"]}


def settings(k: int, layers: int) -> dict:
    "Setting name -> speculative_config (None: the baseline)."
    return {"none": None,
            f"ngram K={k}": {"method": "ngram", "num_speculative_tokens": k},
            "ngram K=1": {"method": "ngram", "num_speculative_tokens": 1},
            f"layer_skip {layers} of 30 K={k}": {"method": "layer_skip", "num_layers": layers,
                                              "num_speculative_tokens": k}}


def run_task(llm: LLM, convs: list, sp: SamplingParams) -> tuple[list, float, dict]:
    "(token ids of each output, (wall, CPU) seconds, speculation counters added by this task) of one chat batch."
    before = dict(llm.engine.stats())
    t0, c0 = time.perf_counter(), time.process_time()
    outs = llm.chat(convs, sp)
    dt = time.perf_counter() - t0, time.process_time() - c0
    after = llm.engine.stats()
    delta = {k: after[k] - before[k] for k in after if k.startswith("spec_decode_num") or k in
             ("steps", "spec_decode_proposer_seconds")}
    return [o.outputs[0].token_ids for o in outs], dt, delta


def figures(ids: list, times: tuple, d: dict) -> dict:
    "tokens per wall and per CPU second, acceptance rate, mean accepted length, proposer share of one task."
    drafts, verifs = d.get("spec_decode_num_draft_tokens", 0), d.get("spec_decode_num_drafts", 0)
    acc = d.get("spec_decode_num_accepted_tokens", 0)
    (dt, cpu), n = times, sum(map(len, ids))
    return {"tokens": n, "seconds": dt, "tokens_per_s": n / dt, "cpu_seconds": cpu, "tokens_per_cpu_s": n / cpu,
            "steps": d["steps"], "acceptance_rate": acc / drafts if drafts else None,
            "mean_accepted_length": 1 + acc / verifs if verifs else None,
            "proposer_share": d.get("spec_decode_proposer_seconds", 0.0) / dt}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=1, help="prompts per task (cycled), served in one batch")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--layers", type=int, default=8, help="layer_skip draft depth (of 30)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: common.py's 2)")
    a = p.parse_args()
    env = setup()
    if a.threads:                       # on a crowded machine 2 spinning threads can stall each other
        torch.set_num_threads(a.threads)
        env = env.replace(f"threads {NUM_THREADS}", f"threads {a.threads}")
    sp = SamplingParams(temperature=0, max_tokens=a.tokens, ignore_eos=True)
    convs = {t: [[{"role": "user", "content": m[i % len(m)]}] for i in range(a.prompts)] for t, m in TASKS.items()}
    results, base = {}, {}
    for name, spec in settings(a.k, a.layers).items():
        with contextlib.redirect_stderr(io.StringIO()):
            llm = LLM(speculative_config=spec)
        llm.chat(convs["chat"][:1], SamplingParams(temperature=0, max_tokens=4))     # warm-up, not timed
        for task in TASKS:
            ids, dt, d = run_task(llm, convs[task], sp)
            r = figures(ids, dt, d)
            base.setdefault(task, (ids, r))
            r |= {"speedup": r["tokens_per_s"] / base[task][1]["tokens_per_s"], "identical": ids == base[task][0],
                  "speedup_cpu": r["tokens_per_cpu_s"] / base[task][1]["tokens_per_cpu_s"]}
            results[f"{task}/{name}"] = r
            print(task, name, {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}, flush=True)
        del llm
    rows = [[*key.split("/"), r["tokens_per_s"], r["speedup"], r["speedup_cpu"], r["steps"], r["acceptance_rate"] or 0.0,
             r["mean_accepted_length"] or 0.0, r["proposer_share"], str(r["identical"])] for key, r in results.items()]
    print(env)
    print(f"SmolLM2-135M-Instruct Q4_1 (dequantized fp32), greedy, {a.prompts} prompts per task in one batch, "
          f"{a.tokens} tokens each")
    print_table(["task", "method", "tok/s", "vs none", "vs none (CPU s)", "steps", "accept", "tok/verif", "proposer", "identical"],
                rows)
    share = cpu_share()
    print(noise_line(share))
    print("saved", save_run("speculative", {"env": env, "args": vars(a), "results": results, **share}))


if __name__ == "__main__":
    main()
