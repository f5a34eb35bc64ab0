"""DeepSeek-V4 on one GPU (issue 17, item 7): fp32 greedy identity against transformers on cuda for a tiny config,
and a bf16 V4-Flash-shaped few-layer decode at an 8k context, batch 1 and 8, with its roofline ratio.

    python benchmarks/gpu/deepseek_v4.py [--out DIR] [--layers 4] [--context 8192] [--batch 1 8]   (H200, a few minutes)
    python benchmarks/gpu/deepseek_v4.py --smoke                            (CPU or GPU, tiny sizes, ~1 min)

Needs transformers >= 5.24 (the first with `transformers.models.deepseek_v4`) for part 1; without it part 1 is
skipped with a message saying so and part 2 still runs.

Part 1, exactness (fp32, eager attention): chapter 37's tiny random config with every kind of layer (a sliding
layer, CSA m=4 with its indexer, HCA m'=8, window 6; hash-routed MoE in the first two layers and a random
`tid2eid`; YaRN on the compress rope; hc_mult 2), saved with `save_pretrained` and served by `LLM` from that
directory on the device (blocks of 4 tokens, `kernels="torch"`: the transformers-exact kernel set). Prompts of 3,
7, 17, 27 and 41 tokens (3 mod 4, past one and two HCA windows of 8, past 2 x 8 + window): transformers
`generate(do_sample=False, min_new_tokens=N, max_new_tokens=N)` per prompt (N = 16) against ours with
`min_tokens=N`, all prompts in one batch and each alone; and the largest logit difference of one full-prompt
forward (`LLM.logits` against transformers' forward), bit-identical or not.

Part 2, speed (bf16, synthetic weights made on the GPU by `load_format="dummy"`): DeepSeek-V4-Flash's layer
shapes, from transformers 5.24's `DeepseekV4Config` defaults (its docstring checkpoint is
deepseek-ai/DeepSeek-V4-Flash-Base) and chapter 36's `_V4_DEFAULTS`: d 4096, vocab 129280, 64 query heads of 512
with one shared K=V head, rope on 64 channels, q rank 1024, grouped output 8 groups x rank 1024, sliding window
128, CSA m=4 with a lightning indexer of 64 heads x 128 and top-k 512, HCA m'=128, mHC n=4 with 20 Sinkhorn
iterations, 256 routed experts of I=2048 (top-6, sqrt-softplus, scale 1.5) plus one shared expert, clamped SwiGLU
at 10. The real model has 43 layers (transformers' default schedule for 43, which its docstring calls V4-Pro's:
2 HCA, then HCA/CSA alternating, 23 HCA and 20 CSA; 3 hash-MoE layers, then 40 top-k); here only `--layers` of them (default 4: HCA, CSA, HCA, CSA; the first hash-routed, with a random
`tid2eid` of distinct experts per token), about 27.4e9 parameters (55 GB bf16). YaRN and multi-token prediction are
left out: neither changes a decode step's bytes. B prompts of `--context` random tokens are prefilled through the
engine (chunks of 4096 tokens), then after warm-up steps each of `--steps` decode steps (all B sequences decoding,
nothing else scheduled) is timed alone (`LLMEngine.step()`, then synchronize). The family has no CUDA graphs
(`supports_cuda_graphs = False`: the MoE loop and the per-sequence attention read sizes on the host), so these
are eager steps.

Roofline: floor ms = bytes one decode step must read / the device copy bandwidth measured in the same run
(`torch.empty(...).copy_()` of 4 GiB, bytes read + written per second; about 4.3 TB/s on the H200). Bytes, bf16
unless stated:
- weights, each once per step: every parameter and buffer of the model, except
  - routed experts: only the experts the batch's tokens are routed to, counted per layer by a hook on the
    experts during the warm-up steps (mean distinct experts per step) x 3 d I x 2 bytes;
  - the input embedding and hash table `tid2eid` (int64): only the B rows looked up;
  - the RoPE `inv_freq` buffers count (tiny); nothing else is skipped: attention projections, compressors,
    the indexer's projections, mHC mappings (bf16 here, as the engine casts them), norms, router, shared
    expert, final HyperHead and norm, LM head (untied, all of it);
- KV, per sequence at context L (its length at the first timed step) and per layer:
  - the sliding K=V stream: min(L, 128) keys of 512 (keys and values are the same tensor: read once);
  - HCA: every compressed entry, floor(L/128) x 512;
  - CSA: the indexer's keys, floor(L/4) x 128 (the indexer scores every one), and the top-k selected entries,
    min(512, floor(L/4)) x 512 (attention needs no other; our PyTorch path reads them all: see the ratio);
  - the compressors' raw projections [2, series c] re-read when a window closes, amortised per token:
    series x 2 series c x 2 bytes (CSA c=512 and its indexer c=128 with 2 series, HCA c=512 with one);
- activations, the writes of new KV, and the sampler are not counted.
ratio = floor / measured (1.0 would be the memory-bound ideal).

Appends one record (git commit, versions, every number) to <out>/<gpu>_deepseek_v4_<date>.json, a list (out: --out,
else $OUT, else benchmarks/results; a file of the same name already in benchmarks/results is the start of the
list when out is elsewhere, so the returned file holds every run). `--smoke` writes to a temporary folder unless
--out is given.
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CSA, HCA = "compressed_sparse_attention", "heavily_compressed_attention"
TINY = dict(architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", vocab_size=256, hidden_size=32,
            moe_intermediate_size=16, intermediate_size=16, num_hidden_layers=4, num_attention_heads=4,
            head_dim=16, q_lora_rank=24, partial_rotary_factor=0.5, num_experts_per_tok=2, n_routed_experts=4,
            sliding_window=6, o_groups=2, o_lora_rank=8, index_n_heads=8, index_head_dim=8, index_topk=2,
            hc_mult=2, compress_rates={CSA: 4, HCA: 8}, max_position_embeddings=256, bos_token_id=1,
            eos_token_id=2, torch_dtype="float32",
            layer_types=["sliding_attention", CSA, HCA, CSA], mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})
FLASH = dict(architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", vocab_size=129280, hidden_size=4096,
             moe_intermediate_size=2048, intermediate_size=2048, num_attention_heads=64, num_key_value_heads=1,
             head_dim=512, q_lora_rank=1024, partial_rotary_factor=64 / 512, n_routed_experts=256,
             num_experts_per_tok=6, n_shared_experts=1, routed_scaling_factor=1.5, scoring_func="sqrtsoftplus",
             sliding_window=128, o_groups=8, o_lora_rank=1024, index_n_heads=64, index_head_dim=128,
             index_topk=512, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, compress_rates={CSA: 4, HCA: 128},
             rope_theta=10000.0, compress_rope_theta=160000.0, swiglu_limit=10.0, rms_norm_eps=1e-6,
             max_position_embeddings=1048576, num_nextn_predict_layers=0, bos_token_id=0, eos_token_id=1,
             tie_word_embeddings=False, torch_dtype="bfloat16")
SMOKE = dict(FLASH, vocab_size=512, hidden_size=64, moe_intermediate_size=32, intermediate_size=32,
             num_attention_heads=4, head_dim=32, q_lora_rank=32, n_routed_experts=8, num_experts_per_tok=2,
             sliding_window=8, o_groups=2, o_lora_rank=16, index_n_heads=4, index_head_dim=16, index_topk=4,
             hc_mult=2, hc_sinkhorn_iters=3, compress_rates={CSA: 4, HCA: 16})


def log(*a) -> None:
    print(*a, flush=True)


def has_hf_deepseek_v4() -> str | None:
    "None if transformers can build DeepSeek-V4, else the reason."
    try:
        import transformers
    except ImportError:
        return "transformers is not installed"
    try:
        import transformers.models.deepseek_v4.modeling_deepseek_v4  # noqa: F401
    except ImportError:
        return (f"transformers {transformers.__version__} has no transformers.models.deepseek_v4 (it arrived in "
                "5.24): pip install the transformers 5.24.0 wheel to run the exactness part")
    return None


def env(dev: str) -> dict:
    try:
        import transformers
        tv = transformers.__version__
    except ImportError:
        tv = None
    commit = os.environ.get("MINI_INFER_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {"gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
            "transformers": tv, "python": platform.python_version(), "commit": commit or None,
            "date": datetime.date.today().isoformat(),
            "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def write_checkpoint(hf, path: Path) -> Path:
    "The reference saved under DeepSeek's names; config.json gains intermediate_size (chapter 37)."
    from mini_infer.oracle import save_tiny
    path = save_tiny(hf, path)
    cfg = path / "config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "intermediate_size": TINY["moe_intermediate_size"]}))
    return path


@torch.no_grad()
def tiny_reference(seed: int = 0):
    "Chapter 37's tiny random DeepSeek-V4 (eager attention and experts), hash table and selection bias random."
    from mini_infer.oracle import hf_tiny_model
    cfg = {k: v for k, v in TINY.items() if k != "intermediate_size"}
    hf = hf_tiny_model(cfg, seed)
    hf.set_experts_implementation("eager")
    g = torch.Generator().manual_seed(seed + 1)
    for name, buf in hf.named_buffers():
        if name.endswith("tid2eid"):
            buf.copy_(torch.randint(0, cfg["n_routed_experts"], buf.shape, generator=g))
        elif name.endswith("e_score_correction_bias"):
            buf.copy_(0.1 * torch.randn(buf.shape, generator=g))
    return hf


@torch.no_grad()
def exactness(dev: str, new_tokens: int) -> dict:
    "Part 1: greedy token identity and prompt-logit differences, transformers against our engine, fp32 on `dev`."
    from mini_infer import LLM, SamplingParams
    hf = tiny_reference()
    tmp = tempfile.TemporaryDirectory()
    path = write_checkpoint(hf, Path(tmp.name) / "tiny-v4")
    hf = hf.to(dev)
    g = torch.Generator().manual_seed(1)
    lengths = [3, 7, 17, 27, 41]
    prompts = [torch.randint(3, TINY["vocab_size"], (n,), generator=g).tolist() for n in lengths]
    ref = []
    for p in prompts:
        x = torch.tensor([p], device=dev)
        out = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, min_new_tokens=new_tokens,
                          max_new_tokens=new_tokens, pad_token_id=0)
        ref.append(out[0, len(p):].tolist())
    llm = LLM(str(path), device=dev, dtype="float32", block_size=4, max_model_len=128, kernels="torch")
    rule = SamplingParams(temperature=0, max_tokens=new_tokens, min_tokens=new_tokens)
    ours = [o.outputs[0].token_ids for o in llm.generate(prompts, rule)]           # one batch
    alone = [llm.generate([p], rule)[0].outputs[0].token_ids for p in prompts]
    rows = []
    for p, o, r, o1 in zip(prompts, ours, ref, alone):
        theirs = hf(torch.tensor([p], device=dev), use_cache=False).logits[0].float().cpu()
        mine = llm.logits(p)
        row = {"prompt_len": len(p), "greedy_identical": o == r, "greedy_alone_identical": o1 == r,
               "first_differing_token": next((i for i, (a, b) in enumerate(zip(o, r)) if a != b), None),
               "logits_bit_identical": torch.equal(mine, theirs),
               "logits_max_abs_diff": (mine - theirs).abs().max().item()}
        rows.append(row)
        log(f"  exact: prompt {len(p):2d} tokens: greedy {new_tokens} tokens identical {row['greedy_identical']} "
            f"(alone {row['greedy_alone_identical']}), "
            f"logits bit-identical {row['logits_bit_identical']}, max |diff| {row['logits_max_abs_diff']:.3g}")
    st = llm.engine.stats()
    return {"config": {k: v for k, v in TINY.items() if k != "architectures"}, "dtype": "float32",
            "device": dev, "new_tokens": new_tokens, "rows": rows,
            "all_greedy_identical": all(r["greedy_identical"] for r in rows),
            "all_greedy_alone_identical": all(r["greedy_alone_identical"] for r in rows),
            "all_logits_bit_identical": all(r["logits_bit_identical"] for r in rows),
            "max_logit_abs_diff": max(r["logits_max_abs_diff"] for r in rows),
            "blocks_free_after": st["kv_blocks_free"] == st["kv_blocks_total"]}


def copy_bandwidth(dev: str, gib: float) -> float:
    "Device copy, bytes read + written per second (GB/s), median of 20 after 5 warm-ups."
    x = torch.empty(int(gib * 2**30) // 2, dtype=torch.bfloat16, device=dev).normal_()
    y = torch.empty_like(x)
    ts = []
    for _ in range(25):
        sync(dev)
        t = time.perf_counter()
        y.copy_(x)
        sync(dev)
        ts.append(time.perf_counter() - t)
    del x, y
    return 2 * gib * 2**30 / statistics.median(ts[5:]) / 1e9


def v4_config(shape: dict, num_layers: int) -> dict:
    "`shape` with `num_layers` layers: HCA/CSA alternating, the first MoE hash-routed, the rest top-k."
    return dict(shape, num_hidden_layers=num_layers,
                layer_types=[HCA if i % 2 == 0 else CSA for i in range(num_layers)],
                mlp_layer_types=["hash_moe"] + ["moe"] * (num_layers - 1))


@torch.no_grad()
def random_hash_tables_(model, seed: int = 0) -> None:
    "Each hash layer's tid2eid: k distinct random experts per token id (dummy weights leave it all zeros)."
    from mini_infer.models.deepseek_v4 import V4Router
    for m in model.modules():
        if isinstance(m, V4Router) and m.is_hash:
            g = torch.Generator(device=m.tid2eid.device).manual_seed(seed)
            E = m.weight.shape[0]
            keys = torch.rand(m.tid2eid.shape[0], E, device=m.tid2eid.device, generator=g)     # [V, E]
            m.tid2eid.copy_(keys.argsort(dim=-1)[:, :m.top_k])


def weight_bytes(model, batch: int, experts_used: dict) -> dict:
    "Bytes of weights one decode step reads (see the docstring), by part."
    from mini_infer.models.deepseek_v4 import V4Experts
    experts = {id(m): name for name, m in model.named_modules() if isinstance(m, V4Experts)}
    by = {"routed_experts": 0.0, "embedding_rows": 0, "hash_rows": 0, "other_weights": 0}
    seen = set()
    for name, m in model.named_modules():
        for pname, t in list(m.named_parameters(recurse=False)) + list(m.named_buffers(recurse=False)):
            key = t.data_ptr() or id(t)                             # a tied weight once (meta: by id)
            if key in seen:
                continue
            seen.add(key)
            nbytes = t.numel() * t.element_size()
            if id(m) in experts:                                    # [E, ...]: the experts used
                by["routed_experts"] += nbytes / t.shape[0] * experts_used[experts[id(m)]]
            elif name.endswith("embed_tokens"):
                by["embedding_rows"] += batch * t.shape[1] * t.element_size()
            elif pname == "tid2eid":
                by["hash_rows"] += batch * t.shape[1] * t.element_size()
            else:
                by["other_weights"] += nbytes
    return by


def kv_bytes(c: dict, L: int, elem: int) -> dict:
    "Bytes of KV one sequence's decode step reads at context L, summed over the layers (see the docstring)."
    D, W, DI = c["head_dim"], c["sliding_window"], c["index_head_dim"]
    m, mh, k = c["compress_rates"][CSA], c["compress_rates"][HCA], c["index_topk"]
    by = {"sliding": 0, "hca_entries": 0, "csa_indexer_keys": 0, "csa_topk_entries": 0, "compressor_raw": 0}
    for kind in c["layer_types"]:
        by["sliding"] += min(L, W) * D * elem
        if kind == HCA:
            by["hca_entries"] += (L // mh) * D * elem
            by["compressor_raw"] += 1 * 2 * 1 * D * elem
        elif kind == CSA:
            by["csa_indexer_keys"] += (L // m) * DI * elem
            by["csa_topk_entries"] += min(k, L // m) * D * elem
            by["compressor_raw"] += 2 * 2 * 2 * D * elem + 2 * 2 * 2 * DI * elem
    return by


def decode_run(llm, dev: str, batch: int, context: int, warmup: int, steps: int, chunk: int, vocab: int,
               seed: int) -> dict:
    "Prefill `batch` random prompts of `context` tokens, then time `steps` decode steps of all of them."
    from mini_infer import SamplingParams
    from mini_infer.models.deepseek_v4 import V4Experts
    e = llm.engine
    g = torch.Generator().manual_seed(seed)
    rids = [f"b{batch}-{i}" for i in range(batch)]
    spare = 2 * batch * -(-context // chunk) + 16         # decode steps a sequence may take while others prefill
    rule = SamplingParams(temperature=0, max_tokens=warmup + steps + spare, ignore_eos=True)
    for rid in rids:
        e.add_request(rid, torch.randint(3, vocab, (context,), generator=g).tolist(), rule)
    t = time.perf_counter()
    n = 0
    while e.has_unfinished_requests() and not all(
            rid in e.requests and e.requests[rid][0].num_output_tokens >= 1 for rid in rids):
        e.step()
        n += 1
    sync(dev)
    prefill_s = time.perf_counter() - t
    failed = [e.finished[r][0].error or e.finished[r][0].finish_reason for r in rids if r in e.finished]
    if failed:
        raise RuntimeError(f"the engine failed a request during prefill: {failed[0]}")
    log(f"  B={batch}: prefilled {batch} x {context} tokens in {n} steps, {prefill_s:.1f} s")
    counts = {name: [] for name, m in llm.model.named_modules() if isinstance(m, V4Experts)}
    hooks = [m.register_forward_hook(lambda mod, args, out, name=name: counts[name].append(
        int(args[1].unique().numel()))) for name, m in llm.model.named_modules() if isinstance(m, V4Experts)]
    for _ in range(warmup):                       # the experts each decode step routes to, counted
        e.step()
    for h in hooks:
        h.remove()
    seqs = [e.requests[rid][0] for rid in rids]
    lengths = [len(s.token_ids) for s in seqs]
    ts = []
    for _ in range(steps):
        sync(dev)
        t = time.perf_counter()
        plan_size = len(e.scheduler.running)
        outs = e.step()
        sync(dev)
        ts.append((time.perf_counter() - t) * 1e3)
        bad = [o for o in outs if getattr(o, "error", None)]
        if bad:
            raise RuntimeError(f"the engine failed a request in a timed step: {bad[0].error}")
        assert plan_size == batch, "a sequence finished or waited during the timed steps"
    assert all(len(s.token_ids) == n + steps for s, n in zip(seqs, lengths)), "a timed step skipped a sequence"
    for rid in rids:
        e.abort(rid)
    while e.has_unfinished_requests():
        e.step()
    for rid in rids:
        e.finished.pop(rid, None)
    used = {name: statistics.mean(v) for name, v in counts.items()}
    ms = statistics.median(ts)
    return {"batch": batch, "context": context, "prefill_s": prefill_s, "prefill_steps": n,
            "context_at_first_timed_step": statistics.mean(lengths), "steps_timed": steps,
            "ms_per_step_median": ms, "ms_per_step_mean": statistics.mean(ts), "ms_per_step_min": min(ts),
            "tokens_per_s": batch / ms * 1e3, "routed_experts_used_per_layer": used}


def speed(dev: str, a) -> dict:
    "Part 2: bf16 V4-Flash-shaped decode at `a.context` tokens, batch sizes `a.batch`, against the roofline."
    from mini_infer import LLM
    shape = SMOKE if a.smoke else FLASH
    c = v4_config(shape, a.layers)
    tmp = tempfile.TemporaryDirectory()
    Path(tmp.name, "config.json").write_text(json.dumps(c))
    bw = copy_bandwidth(dev, 4.0 if dev == "cuda" else 0.25)
    log(f"  copy bandwidth {bw:,.0f} GB/s (read + write)")
    P, chunk = 16, min(4096, a.context)
    max_len = a.context + 256
    t = time.perf_counter()
    llm = LLM(tmp.name, device=dev, dtype="bfloat16", load_format="dummy", max_model_len=max_len, kernels=a.kernels,
              max_num_seqs=max(a.batch), max_num_batched_tokens=chunk, block_size=P,
              num_kv_blocks=max(a.batch) * -(-max_len // P), enable_prefix_caching=False)
    random_hash_tables_(llm.model)
    sync(dev)
    num_params = sum(p.numel() for p in llm.model.parameters())
    log(f"  built {a.layers} layers, {num_params / 1e9:.2f}e9 parameters in {time.perf_counter() - t:.1f} s; "
        f"runner {type(llm.engine.runner).__name__}")
    from mini_infer.layers.csa_hca import deepseek_v4_config
    norm = deepseek_v4_config(c)
    rows = []
    for i, B in enumerate(a.batch):
        row = decode_run(llm, dev, B, a.context, a.warmup, a.steps, chunk, c["vocab_size"], seed=i)
        w = weight_bytes(llm.model, B, row["routed_experts_used_per_layer"])
        kv = kv_bytes(norm, int(row["context_at_first_timed_step"]), 2)
        total = sum(w.values()) + B * sum(kv.values())
        floor = total / bw / 1e6
        row.update({"weight_bytes": w, "kv_bytes_per_sequence": kv, "bytes_per_step": total,
                    "floor_ms": floor, "floor_over_measured": floor / row["ms_per_step_median"]})
        rows.append(row)
        log(f"  B={B}: {row['ms_per_step_median']:.2f} ms/step (median of {a.steps}), "
            f"{row['tokens_per_s']:.1f} tokens/s; reads {total / 1e9:.3f} GB/step, floor {floor:.3f} ms, "
            f"ratio {row['floor_over_measured']:.3f}")
    if dev == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = None
    return {"config": c, "dtype": "bfloat16", "layers": a.layers, "num_parameters": num_params,
            "cuda_graphs": "Graph" in type(llm.engine.runner).__name__, "kernels": llm.engine.kernels,
            "runner": type(llm.engine.runner).__name__,
            "copy_bandwidth_GBps": bw, "block_size": P, "prefill_chunk": chunk, "peak_memory_GiB": peak,
            "rows": rows}


def append_record(record: dict, out: str | None, smoke: bool) -> Path:
    "Append `record` to <out>/<gpu>_deepseek_v4_<date>.json (a list), starting from the repository's copy."
    gpu = record["env"]["gpu"].lower().replace("nvidia ", "nvidia-").replace(" ", "-")
    name = f"{'cpu-2core' if gpu == 'cpu' else gpu}_deepseek_v4_{record['env']['date']}.json"
    results = ROOT / "benchmarks" / "results"
    folder = Path(out or (tempfile.mkdtemp(prefix="v4-smoke-") if smoke else None)
                  or os.environ.get("OUT") or results)
    path, repo_copy = folder / name, results / name
    source = path if path.exists() else repo_copy if not smoke and repo_copy.exists() else None
    runs = json.loads(source.read_text()) if source else []
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(runs + [record], indent=1) + "\n")
    log(f"appended run {len(runs) + 1} to {path}")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 2 steps: runs on the CPU")
    ap.add_argument("--parts", nargs="+", default=["exact", "speed"], choices=["exact", "speed"])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--context", type=int, default=None, help="prompt tokens (8192; smoke 64)")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--kernels", default="auto", choices=["auto", "triton", "torch"],
                    help="part 2's kernel set (auto: triton on CUDA); part 1 runs kernels='torch'")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    a = ap.parse_args()
    a.context = a.context or (64 if a.smoke else 8192)
    a.warmup = a.warmup or (2 if a.smoke else 6)
    a.steps = a.steps or (2 if a.smoke else 30)
    if a.smoke and a.batch == [1, 8]:
        a.batch = [1, 2]
    if a.layers < 2:
        raise SystemExit("--layers must be at least 2 (one HCA and one CSA layer)")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and not a.smoke:
        raise SystemExit("deepseek_v4.py needs a CUDA GPU; --smoke runs tiny sizes on the CPU")
    record = {"bench": "deepseek_v4", "env": env(dev), "smoke": a.smoke, "args": vars(a)}
    log(f"deepseek_v4 on {record['env']['gpu']}: torch {torch.__version__}, "
        f"transformers {record['env']['transformers']}, commit {record['env']['commit']}")
    if "exact" in a.parts:
        why = has_hf_deepseek_v4()
        if why:
            log(f"part 1 (exactness) skipped: {why}")
            record["exact"] = {"skipped": why}
        else:
            log("part 1: fp32 greedy identity against transformers")
            t = time.perf_counter()
            record["exact"] = exactness(dev, 4 if a.smoke else 16)
            log(f"  {time.perf_counter() - t:.1f} s; all greedy identical {record['exact']['all_greedy_identical']}, "
                f"max logit |diff| {record['exact']['max_logit_abs_diff']:.3g}")
    if "speed" in a.parts:
        log(f"part 2: bf16 V4-Flash-shaped decode, {a.layers} layers, context {a.context}, batch {a.batch}")
        record["speed"] = speed(dev, a)
    append_record(record, a.out, a.smoke)
    if "speed" in record:
        log("\n  B  context  ms/step  tokens/s  GB read/step  floor ms  floor/measured")
        for r in record["speed"]["rows"]:
            log(f"{r['batch']:3d}  {r['context']:7d}  {r['ms_per_step_median']:7.2f}  {r['tokens_per_s']:8.1f}  "
                f"{r['bytes_per_step'] / 1e9:12.3f}  {r['floor_ms']:8.3f}  {r['floor_over_measured']:14.3f}")
        log(f"copy bandwidth {record['speed']['copy_bandwidth_GBps']:,.0f} GB/s; runner "
            f"{record['speed']['runner']} (no CUDA graphs for DeepSeek-V4)")
    ex = record.get("exact", {})
    if ex.get("rows") and not ex["all_greedy_identical"]:
        raise SystemExit("part 1: a greedy continuation differs from transformers (see the record)")


if __name__ == "__main__":
    main()
