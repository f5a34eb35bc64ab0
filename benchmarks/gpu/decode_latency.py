"""Benchmark a: batch-1 decode ms/step, Qwen2.5-0.5B and Qwen2.5-7B shapes, bf16, int8 and int4, against the HBM floor
and HF transformers `generate` (bf16, SDPA, same weights) in the same run.

    python benchmarks/gpu/decode_latency.py [--shapes Qwen2.5-0.5B Qwen2.5-7B] [--weights bf16 int8 int4] [--kernels auto]
        [--out DIR]  (H200, ~3 min for bf16 and int8, ~1 more for int4)

int4 is `quantization="int4"` (chapter 41: groups of 64, asymmetric) with chapter 41a's Triton kernels.

floor = bytes one decode step must read (every weight once; an untied embedding table only one row) / measured
device copy bandwidth. mini_infer runs with CUDA graphs and the fused kernels (the engine's defaults on CUDA);
`--kernels torch` measures chapter 25's `transformers`-exact mode instead (no graphs: no graph columns).
"""
import argparse

import torch

from common import (config_dir, copy_bandwidth, env, free_cuda, hf_twin, ms_per_step, save, table)


def weight_bytes_read(model) -> int:
    "Bytes one decode step reads: every weight storage once (tied and merged ones once), an untied input embedding not at all."
    seen, total = set(), 0
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        storage = t.untyped_storage()
        if "cos_sin_cache" in name or storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    emb, head = model.model.embed_tokens.weight, model.lm_head.weight
    if emb.data_ptr() != head.data_ptr():
        total -= emb.numel() * emb.element_size()                    # one row of it, not the table
    return total


def linears_in_use(model) -> list:
    "The linear layers a forward calls: merged ones (qkv_proj, gate_up_proj) instead of their parts."
    merged_parts = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
    skip = set()
    for m in model.modules():
        for merged, parts in merged_parts.items():
            if getattr(m, merged, None) is not None:
                skip.update(id(getattr(m, p)) for p in parts)
    return [m for m in model.modules() if id(m) not in skip
            and type(m).__name__ in ("ColumnParallelLinear", "RowParallelLinear", "Int8Linear", "Int4Linear")]


def in_size(m) -> int:
    "Input size K of a linear layer (an int4 layer's qweight holds K/2 bytes per row)."
    return m.weight.shape[1] if getattr(m, "weight", None) is not None else m.in_features


def event_ms(fn, repeats: int = 50) -> float:
    "Median GPU milliseconds of fn() by CUDA events, after a warm-up."
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


@torch.no_grad()
def breakdown(llm) -> dict:
    "Where a batch-1 decode step goes: the graph replay alone (GPU), and a graph of only the linears + lm_head."
    runner = llm.engine.runner
    out = {"graph_replay_ms": event_ms(runner.graphs[1].replay)}
    linears = linears_in_use(llm.model)
    dtype = llm.engine.dtype
    xs = {}
    for m in linears:
        xs.setdefault(in_size(m), torch.randn(1, in_size(m), device="cuda", dtype=dtype))
    h = torch.randn(1, llm.config.hidden_size, device="cuda", dtype=dtype)
    def all_linears():
        for m in linears:
            m(xs[in_size(m)])
        llm.model.compute_logits(h)
    all_linears(); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        all_linears()
    out["linears_graph_ms"] = event_ms(g.replay)
    out["num_linears"] = len(linears)
    return out


def main() -> None:
    from mini_infer import LLM, SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["Qwen2.5-0.5B", "Qwen2.5-7B"])
    ap.add_argument("--weights", nargs="+", default=["bf16", "int8"], choices=["bf16", "int8", "int4"])
    ap.add_argument("--steps", type=int, default=129)
    ap.add_argument("--kernels", default="auto", choices=["auto", "triton", "torch"])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    bw = copy_bandwidth()
    res = {"env": env(), "copy_bandwidth_GBps": bw, "steps": a.steps, "kernels": a.kernels, "rows": []}
    prompt = list(range(1000, 1016))
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    for shape in a.shapes:
        path = config_dir(shape)
        for quant in [None if w == "bf16" else w for w in a.weights]:
            llm = LLM(path, dtype="bfloat16", device="cuda", load_format="dummy", quantization=quant,
                      max_model_len=2048, max_num_seqs=8, num_kv_blocks=1024, kernels=a.kernels)
            nbytes = weight_bytes_read(llm.model)
            ms = ms_per_step(lambda n: llm.generate([prompt], greedy(n)), a.steps)
            row = {"shape": shape, "weights": quant or "bf16", "mini_infer_ms": ms, "floor_ms": nbytes / bw / 1e6,
                   "weight_GB_read": nbytes / 1e9, "graph_memory_MiB": getattr(llm.engine.runner, "graph_memory_bytes", 0) / 2**20,
                   "passes": [name for name, _ in llm.engine.passes]}
            if getattr(llm.engine.runner, "graphs", None):
                row.update(breakdown(llm))
            if quant is None:
                hf = hf_twin(llm, shape, torch.bfloat16)
                x = torch.tensor([prompt], device="cuda")
                def hf_gen(n):
                    with torch.no_grad():
                        hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                                    min_new_tokens=n, pad_token_id=0)
                row["hf_ms"] = ms_per_step(hf_gen, a.steps)
                del hf
                free_cuda()
            res["rows"].append(row)
            print(row, flush=True)
            del llm
            free_cuda()
    by = {(r["shape"], r["weights"]): r for r in res["rows"]}
    for shape in a.shapes:
        for quant in ("int8", "int4"):
            if (shape, quant) in by and (shape, "bf16") in by:
                by[(shape, quant)]["speedup_vs_bf16"] = by[(shape, "bf16")]["mini_infer_ms"] / by[(shape, quant)]["mini_infer_ms"]
    save("decode_latency" + ("" if a.kernels == "auto" else f"_{a.kernels}_kernels"), res, a.out)
    print(f"\ncopy bandwidth {bw:,.0f} GB/s (read + write); {res['env']}")
    print(table(["shape", "weights", "GB read", "floor ms", "mini_infer ms", "% of floor", "HF ms", "HF / ours",
                 "graph ms", "linears ms"],
                [[r["shape"], r["weights"], r["weight_GB_read"], r["floor_ms"], r["mini_infer_ms"],
                  100 * r["floor_ms"] / r["mini_infer_ms"], r.get("hf_ms", float("nan")),
                  r.get("hf_ms", float("nan")) / r["mini_infer_ms"], r.get("graph_replay_ms", float("nan")),
                  r.get("linears_graph_ms", float("nan"))]
                 for r in res["rows"]]))
    print("graph ms: one replay of the batch-1 decode graph (GPU only); linears ms: a graph of only its linear layers "
          "and the lm_head; mini_infer ms - graph ms is the engine's host work per step")


if __name__ == "__main__":
    main()
