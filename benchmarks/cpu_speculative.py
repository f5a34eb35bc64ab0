"""Speculative decoding on the bundled SmolLM2, CPU: ngram and layer_skip against no speculation, same run.

Two tasks: input-grounded (rewrite a given passage) and open-ended chat. Greedy; each setting's outputs are checked
token-identical to the run without speculation. Prints acceptance, tokens per verification and tokens/s ratios.
Run: .venv/bin/python benchmarks/cpu_speculative.py [--prompts 4 --tokens 48]
"""
import argparse
import contextlib
import io
import time

from common import cpu_share, noise_line, print_table, save_run, setup
from mini_infer import LLM, SamplingParams

PASSAGE = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
           "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.")
TASKS = {"rewrite": [f"Repeat the following passage exactly, word for word.\n\n{PASSAGE}",
                     f"Rewrite this passage in the same words, then stop.\n\n{PASSAGE}"],
         "chat": ["Tell me a short story about a robot.", "What should I cook tonight?"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=4, help="prompts per task (cycled), served in one batch")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--layers", type=int, default=15, help="layer_skip draft depth (of 30)")
    a = p.parse_args()
    env = setup()
    settings = {"none": None, "ngram": {"method": "ngram", "num_speculative_tokens": a.k},
                "layer_skip": {"method": "layer_skip", "num_layers": a.layers, "num_speculative_tokens": a.k}}
    sp = SamplingParams(temperature=0, max_tokens=a.tokens, ignore_eos=True)
    rows, results = [], {}
    for task, msgs in TASKS.items():
        convs = [[{"role": "user", "content": msgs[i % len(msgs)]}] for i in range(a.prompts)]
        want, base_tps = None, None
        for name, spec in settings.items():
            with contextlib.redirect_stderr(io.StringIO()):
                llm = LLM(speculative_config=spec)
            t0 = time.perf_counter()
            outs = llm.chat(convs, sp)
            dt = time.perf_counter() - t0
            ids = [o.outputs[0].token_ids for o in outs]
            want = want or ids
            st, tps = llm.engine.stats(), sum(map(len, ids)) / dt
            base_tps = base_tps or tps
            r = {"tokens_per_s": tps, "ratio": tps / base_tps, "identical": ids == want, "steps": st["steps"],
                 "acceptance_rate": st.get("spec_decode_acceptance_rate"),
                 "mean_accepted_length": st.get("spec_decode_mean_accepted_length"),
                 "proposer_seconds": st.get("spec_decode_proposer_seconds")}
            results[f"{task}/{name}"] = r
            rows.append([task, name, tps, r["ratio"], st["steps"], r["acceptance_rate"] or 0.0,
                         r["mean_accepted_length"] or 0.0, str(r["identical"])])
            print(rows[-1], flush=True)
    print(env)
    print_table(["task", "method", "tok/s", "vs none", "steps", "accept", "tok/verif", "identical"], rows)
    share = cpu_share()
    print(noise_line(share))
    print("saved", save_run("speculative", {"env": env, "args": vars(a), "results": results, **share}))


if __name__ == "__main__":
    main()
