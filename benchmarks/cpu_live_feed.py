"""What the live page's feed (chapter 26a) costs the engine: the host time of a step with no observer, with the
feed at its default 10 frames a second, and with a frame built after every step (the worst case, `fps` above the
step rate), and the part of the step spent inside the observer, which is what the feed takes from the engine
thread whatever else runs on the machine. The workload is host-bound on purpose: a 1-layer tiny Qwen3, 128 sequences x 64 decode tokens, where
the forward is cheap and Python dominates, so the feed's share is as large as it gets. Modes alternate ABCABC in
one process; the median of the rounds is reported.

Run: .venv/bin/python benchmarks/cpu_live_feed.py [--rounds 3]
"""
import argparse
import statistics
import tempfile
import time

from common import cpu_share, noise_line, print_table, save_run, setup


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    env = setup()
    from mini_infer import LLM, SamplingParams
    from mini_infer.api.live import LiveFeed
    from mini_infer.oracle import hf_tiny_model, save_tiny

    cfg = dict(model_type="qwen3", vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)
    engine = LLM(str(save_tiny(hf_tiny_model(cfg), tempfile.mkdtemp())), max_num_seqs=128,
                 num_kv_blocks=2048).engine
    B = 128

    def run(tag: str, observer) -> tuple[float, float, int]:
        """ms per step of 128 sequences x 64 tokens, the observer called after each step as run_engine does;
        and of those, the ms per step spent inside the observer."""
        for i in range(B):
            engine.add_request(f"{tag}{i}", [(7 * i + j) % 250 + 3 for j in range(8 + i % 5)],
                               SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
        steps, inside, t = 0, 0.0, time.perf_counter()
        while engine.has_unfinished_requests():
            engine.step()
            steps += 1
            if observer is not None:
                t_obs = time.perf_counter()
                observer(engine)
                inside += time.perf_counter() - t_obs
        return 1000 * (time.perf_counter() - t) / steps, 1000 * inside / steps, steps

    modes = {"no observer": lambda: None, "feed, 10 fps": lambda: LiveFeed(fps=10),
             "feed, every step": lambda: LiveFeed(fps=1e9)}
    run("warm", None)
    ms, observer_ms = {m: [] for m in modes}, {m: [] for m in modes}
    frames = {m: 0 for m in modes}
    for r in range(args.rounds):
        for m, make in modes.items():
            observer = make()
            t, t_obs, steps = run(f"{r}{m}", observer)
            ms[m].append(t)
            observer_ms[m].append(t_obs)
            frames[m] = observer.num_frames if observer is not None else 0
    base = statistics.median(ms["no observer"])
    rows = [[m, statistics.median(v), statistics.median(v) / base, statistics.median(observer_ms[m]),
             frames[m]] for m, v in ms.items()]
    share = cpu_share()
    print(env)
    print(f"workload   : 1-layer tiny Qwen3, {B} sequences x 64 decode tokens, {steps} steps a round, "
          f"{args.rounds} rounds")
    print_table(["mode", "ms/step (median)", "vs none", "of it in the observer (ms)", "frames (last round)"],
                rows)
    print(noise_line(share))
    path = save_run("live_feed", {"env": env, "rounds": args.rounds, "steps_per_round": steps,
                                  "ms_per_step": ms, "observer_ms_per_step": observer_ms,
                                  "frames_last_round": frames, **share})
    print(f"saved      : {path.relative_to(path.parent.parent.parent)}")


if __name__ == "__main__":
    main()
