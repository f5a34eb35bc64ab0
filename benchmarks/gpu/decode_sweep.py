"""Issue 23 item 4: decode ms/step for batch 1, 8, 32, 128, 256 at contexts 1k and 8k (Qwen2.5-7B and Qwen3-0.6B
shapes, synthetic weights, bf16) against the roofline of the bytes one step must read, weights + K/V.

    python benchmarks/gpu/decode_sweep.py [--shapes Qwen2.5-7B Qwen3-0.6B] [--compare-fused] [--out DIR]  (H200, ~4 min)
    python benchmarks/gpu/decode_sweep.py --smoke [--compare-fused]   (CPU, tiny shape, seconds: checks that it runs)

A step is one replay of the engine's own captured decode graph at that batch size (CUDA graphs on: the engine's
default on CUDA), after its static buffers are filled with B sequences of `ctx` tokens, each in its own blocks, so
every K/V byte read is a distinct byte. The time is the GPU's (CUDA events, median of 20 replays); the engine's
host work per step (scheduling, sampling, detokenizing) is not in it. roofline ms = (weight bytes + B * ctx * K/V
bytes per token) / the device-to-device copy bandwidth measured in the same run (bytes read + written per second,
as decode_latency.py's floor). Combinations whose K/V does not fit the cache the engine could allocate are skipped.
--compare-fused times the Qwen2.5-0.5B and Qwen3-0.6B batch-1 steps at context 1k with chapter 21b's fused
(QK-norm +) RoPE + K/V write on and off in the same run (graph replay, and whole engine steps through `generate`).
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import torch

from common import (SHAPES, config_dir, copy_bandwidth, env, free_cuda, ms_per_step, out_dir, print_rows,
                    save)

TINY = dict(SHAPES["Qwen3-0.6B"], vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512)


def cpu_copy_bandwidth(mib: int = 64) -> float:
    "The CPU's copy bandwidth (GB/s, read + write), for --smoke only."
    x = torch.randn(mib << 18)
    y = torch.empty_like(x)
    ts = []
    for _ in range(5):
        t = time.perf_counter(); y.copy_(x); ts.append(time.perf_counter() - t)
    return 2 * x.nbytes / min(ts) / 1e9


def kv_bytes_per_token(model) -> int:
    "Bytes of K/V one cached token holds over all layers (every layer's streams, one slot each)."
    return sum(t[0, 0].numel() * t.element_size() for m in model.modules()
               if getattr(m, "kv_cache", None) for t in m.kv_cache.values())


def fill_decode(llm, batch: int, ctx: int):
    """A callable running one decode step of `batch` sequences of `ctx` tokens (the last one new), each in
    distinct blocks: the captured graph's replay on CUDA, the model on the CPU."""
    from mini_infer.layers.attention import build_metadata
    P, dev = llm.engine.block_size, llm.engine.runner.device
    nb = -(-ctx // P)
    tables = torch.arange(batch * nb, dtype=torch.int32).view(batch, nb)       # [B, nb] own blocks
    slots = tables[:, (ctx - 1) // P].long() * P + (ctx - 1) % P               # [B] the new token's slot
    runner = llm.engine.runner
    if getattr(runner, "graphs", None):
        if batch not in runner.graphs:
            raise SystemExit(f"batch {batch} has no captured graph; captured: {sorted(runner.graphs)}")
        buf = runner.buffers
        buf.input_ids[:batch] = torch.arange(batch) % 1000 + 100
        buf.positions[:batch], buf.slot_mapping[:batch], buf.seq_lens[:batch] = ctx - 1, slots.to(dev), ctx
        buf.block_tables[:batch].fill_(runner.pad_block)
        buf.block_tables[:batch, :nb] = tables.to(dev)
        return runner.graphs[batch].replay
    md = build_metadata([1] * batch, [ctx] * batch, tables.tolist(), P, device=dev)
    ids = (torch.arange(batch) % 100 + 3).to(dev)
    pos = torch.full((batch,), ctx - 1, device=dev)
    model = llm.model
    return lambda: model.compute_logits(model(ids, pos, md))


def step_ms(fn, cuda: bool, repeats: int = 20) -> float:
    "Median milliseconds of fn(): CUDA events on the GPU, wall time on the CPU, after up to two warm-ups."
    for _ in range(min(2, repeats - 1)):                # none for a one-shot smoke timing
        fn()
    ts = []
    for _ in range(repeats):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); fn(); b.record(); torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t = time.perf_counter(); fn(); ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def make_llm(shape: str, device: str, max_batch: int, max_ctx: int, **kw):
    from mini_infer import LLM
    path = config_dir(shape)
    return LLM(path, dtype="bfloat16" if device == "cuda" else "float32", device=device, load_format="dummy",
               max_model_len=max_ctx, max_num_seqs=max_batch, **kw)


def sweep(shape: str, device: str, batches: list[int], contexts: list[int], bw: float) -> list[dict]:
    from decode_latency import weight_bytes_read
    cuda = device == "cuda"
    kw = dict(gpu_memory_utilization=0.9) if cuda else dict(num_kv_blocks=max(batches) * -(-max(contexts) // 16))
    llm = make_llm(shape, device, max(batches), max(contexts), **kw)
    wbytes, kvtok = weight_bytes_read(llm.model), kv_bytes_per_token(llm.model)
    P, num_blocks = llm.engine.block_size, llm.engine.num_kv_blocks
    rows = []
    for ctx in contexts:
        for b in batches:
            row = {"shape": shape, "batch": b, "context": ctx, "kv_GB": b * ctx * kvtok / 1e9}
            if b * -(-ctx // P) > num_blocks:
                row["skipped"] = f"K/V needs {b * -(-ctx // P)} blocks, the cache holds {num_blocks}"
            else:
                ms = step_ms(fill_decode(llm, b, ctx), cuda)
                floor = (wbytes + b * ctx * kvtok) / bw / 1e6
                row.update(ms_per_step=ms, roofline_ms=floor, fraction_of_roofline=floor / ms,
                           tokens_per_s=b / ms * 1e3)
            rows.append(row)
            print(row, flush=True)
    del llm
    if cuda:
        free_cuda()
    return rows


def compare_fused(device: str, shape: str = "Qwen2.5-0.5B", ctx: int = 1024) -> list[dict]:
    "Batch-1 step of `shape` with chapter 21b's fused RoPE + K/V write on and off, one model, one run."
    from mini_infer import SamplingParams
    from mini_infer.kernels.triton_rope_cache import use_rope_store
    cuda = device == "cuda"
    llm = make_llm(shape, device, 8, 2048 if cuda else 128, num_kv_blocks=1024 if cuda else 16,
                   kernels="triton")
    prompt = list(range(1000, 1016))
    gen = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    rows = []
    for fused in (True, False, True):                    # on, off, on again: drift shows as a gap
        n = use_rope_store(llm.model, enable=fused)
        if getattr(llm.engine.runner, "graphs", None):
            llm.engine.runner.capture()                  # the graphs hold the kernels: capture again
        row = {"shape": shape, "fused_rope_store": fused, "layers_fused": n if fused else 0,
               "graph_ms": step_ms(fill_decode(llm, 1, ctx), cuda, 20 if cuda else 1)}
        if cuda:
            row["engine_ms_per_step"] = ms_per_step(gen, 65, 3)
        rows.append(row)
        print(row, flush=True)
    del llm
    if cuda:
        free_cuda()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["Qwen2.5-7B", "Qwen3-0.6B"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32, 128, 256])
    ap.add_argument("--contexts", nargs="+", type=int, default=[1024, 8192])
    ap.add_argument("--compare-fused", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="CPU, a tiny shape: checks that the script runs")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    device = "cpu" if a.smoke else "cuda"
    if a.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")     # before mini_infer's kernels are imported
        SHAPES["tiny"] = TINY
        a.shapes, a.batches, a.contexts = ["tiny"], [1, 4], [32, 64]
    if a.smoke and not (a.out or os.environ.get("OUT")):
        a.out = tempfile.mkdtemp(prefix="decode_sweep_smoke-")     # smoke runs stay out of the ledger
    bw = cpu_copy_bandwidth() if a.smoke else copy_bandwidth()
    res = {"env": env(), "copy_bandwidth_GBps": bw, "smoke": a.smoke, "rows": []}
    for shape in a.shapes:
        res["rows"] += sweep(shape, device, a.batches, a.contexts, bw)
    if a.compare_fused:                               # smoke: the tiny shape under the Triton interpreter
        res["compare_fused"] = (compare_fused(device, "tiny", 64) if a.smoke else
                                compare_fused(device) + compare_fused(device, "Qwen3-0.6B"))
    name = "decode_sweep" + ("_smoke" if a.smoke else "")
    gpu = res["env"]["gpu"].lower().replace("nvidia ", "nvidia-").replace(" ", "-")
    path = out_dir(a.out) / f"{'cpu-2core' if gpu == 'cpu' else gpu}_{name}_{res['env']['date']}.json"
    old = json.loads(path.read_text())["runs"] if path.exists() else []   # recorded runs are kept
    save(name, {"env": res["env"], "runs": old + [res]}, a.out)
    print(f"\ncopy bandwidth {bw:,.0f} GB/s (read + write); {res['env']}")
    print_rows([{k: v for k, v in r.items() if k != "skipped"} | ({"skipped": "yes"} if "skipped" in r else {})
                for r in res["rows"]])
    if res.get("compare_fused"):
        print_rows(res["compare_fused"])
    print("ms_per_step: one replay of the engine's decode graph (GPU time; host work excluded); roofline_ms: "
          "(weights + B * ctx * K/V bytes per token) / copy bandwidth")


if __name__ == "__main__":
    main()
