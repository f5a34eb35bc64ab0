"""Offline throughput on the bundled SmolLM2: 32 requests, one mini_infer `generate` against transformers in batches of 8.

Run: .venv/bin/python benchmarks/cpu_throughput.py [--max-num-batched-tokens 2048] [--batch-invariant]

--batch-invariant measures chapter 25's batch-invariant mode (one forward per sequence per step) against the same
transformers peer; its runs go to a results file of their own (`throughput_batch_invariant`).
"""
import argparse
import contextlib
import io
import time

import torch

from common import NUM_THREADS, cpu_share, noise_line, print_table, save_run, setup
from mini_infer import LLM, SamplingParams
from mini_infer.cli import hf_peer

NUM_SPECIAL_IDS = 17          # SmolLM2's ids 0..16 are control tokens (GGUF token_type 3): never in a prompt


def make_requests(num: int, vocab_size: int, seed: int = 0) -> tuple[list[list[int]], list[int]]:
    "Random prompts (ids outside the special ones) of 16..256 tokens and output lengths 16..128, seeded."
    g = torch.Generator().manual_seed(seed)
    prompt_lens = torch.randint(16, 257, (num,), generator=g).tolist()
    output_lens = torch.randint(16, 129, (num,), generator=g).tolist()
    prompts = [torch.randint(NUM_SPECIAL_IDS, vocab_size, (n,), generator=g).tolist() for n in prompt_lens]
    return prompts, output_lens


def run_mini_infer(llm: LLM, prompts, output_lens) -> tuple[float, list[list[int]]]:
    "Wall seconds of one `generate` over every request, and the generated ids."
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in output_lens]
    t = time.perf_counter()
    outs = llm.generate(prompts, params)
    return time.perf_counter() - t, [o.outputs[0].token_ids for o in outs]


def timed_round(fn) -> dict:
    "Run fn(); its wall seconds, and the share of the two cores this process got meanwhile."
    t, c = time.perf_counter(), time.process_time()
    result = fn()
    wall = time.perf_counter() - t
    return {"s": wall, "cpu_share": (time.process_time() - c) / (wall * NUM_THREADS), "result": result}


@torch.no_grad()
def run_hf(hf, prompts, output_lens, batch_size: int, pad_id: int) -> tuple[float, list[list[int]], int]:
    "Wall seconds of `generate` over left-padded batches in request order; ids; tokens computed (useful or not)."
    t, tokens, computed = time.perf_counter(), [], 0
    for i in range(0, len(prompts), batch_size):
        batch, lens = prompts[i:i + batch_size], output_lens[i:i + batch_size]
        width, n = max(map(len, batch)), max(lens)
        ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in batch])                 # [b, S] left padded
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        out = hf.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n, min_new_tokens=n,
                          pad_token_id=pad_id)
        tokens += [row[width:width + k].tolist() for row, k in zip(out, lens)]             # the n_i useful ones
        computed += len(batch) * n
    return time.perf_counter() - t, tokens, computed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-requests", type=int, default=32)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--hf-batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=2, help="rounds per engine, in ABBA order; the best is reported")
    p.add_argument("--batch-invariant", action="store_true", help="LLM(batch_invariant=True)")
    a = p.parse_args()
    env = setup()
    with contextlib.redirect_stderr(io.StringIO()):
        llm = LLM(dtype="float32", device="cpu", max_num_batched_tokens=a.max_num_batched_tokens,
                  batch_invariant=a.batch_invariant)
        hf = hf_peer(None, torch.float32, "cpu")
    prompts, output_lens = make_requests(a.num_requests, llm.config.vocab_size, a.seed)
    useful = sum(output_lens)
    pad_id = llm.tokenizer.eos_token_id
    run_mini_infer(llm, prompts[:2], [4, 4])                                              # warm-ups
    run_hf(hf, prompts[:2], [4, 4], 2, pad_id)
    steps0 = llm.engine.stats()["steps"]
    engines = {"mini_infer": lambda: run_mini_infer(llm, prompts, output_lens),
               "transformers": lambda: run_hf(hf, prompts, output_lens, a.hf_batch_size, pad_id)}
    rounds = {"mini_infer": [], "transformers": []}
    for r in range(a.rounds):                                  # ABBA: mini, hf, hf, mini, ... balances slow drift
        for name in (["mini_infer", "transformers"] if r % 2 == 0 else ["transformers", "mini_infer"]):
            rounds[name].append(timed_round(engines[name]))
    ours_ids, (hf_ids, hf_computed) = rounds["mini_infer"][0]["result"][1], rounds["transformers"][0]["result"][1:]
    same = sum(x == y for x, y in zip(ours_ids, hf_ids))
    st = llm.engine.stats()
    steps = (st["steps"] - steps0) // a.rounds
    ours_s, hf_s = min(x["s"] for x in rounds["mini_infer"]), min(x["s"] for x in rounds["transformers"])
    ours_tps, hf_tps = useful / ours_s, useful / hf_s
    print(f"environment: {env} (torch.set_num_threads({NUM_THREADS}))")
    print(f"workload   : {a.num_requests} requests, random prompt ids (no special ids) of 16..256 tokens "
          f"({sum(map(len, prompts))} in all), 16..128 output tokens ({useful} in all), greedy, ignore_eos, seed {a.seed}")
    print(f"mini_infer : one generate, max_num_batched_tokens={a.max_num_batched_tokens}, "
          f"{steps} steps" + (", batch_invariant (one forward per sequence)" if a.batch_invariant else ""))
    print(f"transformers: {hf.config._attn_implementation}, generate in batches of {a.hf_batch_size} in request "
          f"order, left padded, max_new_tokens = min_new_tokens = batch max ({hf_computed} tokens computed, only the "
          f"{useful} requested counted)\n")
    print_table(["engine", "wall s per round", "CPU share per round", "best output tok/s"],
                [[name, " ".join(f"{x['s']:.1f}" for x in rs), " ".join(f"{x['cpu_share']:.0%}" for x in rs),
                  useful / min(x["s"] for x in rs)] for name, rs in rounds.items()])
    print(f"\nratio mini_infer / transformers (best rounds): {ours_tps / hf_tps:.2f}x; greedy outputs identical for "
          f"{same}/{len(prompts)}")
    share = cpu_share()
    print(noise_line(share))
    path = save_run("throughput_batch_invariant" if a.batch_invariant else "throughput", {
        "env": env, "threads": NUM_THREADS, **share, "num_requests": a.num_requests, "seed": a.seed,
        "prompt_tokens": sum(map(len, prompts)), "output_tokens": useful, "hf_tokens_computed": hf_computed,
        "max_num_batched_tokens": a.max_num_batched_tokens, "hf_batch_size": a.hf_batch_size,
        "rounds": a.rounds, "mini_infer_rounds": [{k: x[k] for k in ("s", "cpu_share")} for x in rounds["mini_infer"]],
        "hf_rounds": [{k: x[k] for k in ("s", "cpu_share")} for x in rounds["transformers"]],
        "mini_infer_s": ours_s, "hf_s": hf_s, "mini_infer_tok_s": ours_tps, "hf_tok_s": hf_tps,
        "ratio": ours_tps / hf_tps, "steps": steps, "num_preemptions": st["num_preemptions"],
        "identical_outputs": same})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
