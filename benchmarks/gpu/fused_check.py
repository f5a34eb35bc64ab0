"""Chapter 21b on the GPU: the fused RoPE + paged K/V write kernel against the two kernels it replaces (bit for bit,
bf16, real head shapes), the kernels one decode layer launches with the hook off and on (torch.profiler), and
microseconds per layer and per rotation + write inside a CUDA graph.

    python benchmarks/gpu/fused_check.py [--out DIR]     (H200, ~1 min; exits 1 if a bit differs)
    python benchmarks/gpu/fused_check.py --smoke         (CPU, Triton interpreter, tiny shapes: that it runs)

The notebook nbs/21b_triton_fused_rope_cache.ipynb calls check_bits, layer_kernels and rope_store_us from its
`#| cuda` cells.
"""
import argparse
import json
import os
import sys
import tempfile
from collections import Counter

import torch

if __name__ == "__main__" and "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")      # before mini_infer's kernels are imported
from torch.profiler import ProfilerActivity, profile

from common import SHAPES, config_dir, env, free_cuda, graphed_us, out_dir, print_rows, save

HEADS = {"Qwen2.5-0.5B": (14, 2, 64), "Qwen2.5-7B": (28, 4, 128), "Qwen3-0.6B": (16, 8, 128)}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"      # cpu: --smoke under TRITON_INTERPRET=1


def inputs(T: int, H: int, Hkv: int, D: int, seed: int = 0, N: int = 512, P: int = 16):
    "Strided bf16 q, k, v views of one qkv output, positions, distinct slots (one -1), a table, two caches."
    from mini_infer.layers.basic import RotaryEmbedding
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    qkv = (torch.randn(T, (H + 2 * Hkv) * D, device=DEVICE, generator=g) * 3).to(torch.bfloat16)
    q, k, v = qkv.split([H * D, Hkv * D, Hkv * D], dim=-1)
    rope = RotaryEmbedding(D, 32768, 1e6).to(DEVICE)
    positions = torch.randint(0, 32768, (T,), device=DEVICE, generator=g)
    slots = torch.randperm(N * P, device=DEVICE, generator=g)[:T]
    slots[T // 2] = -1
    caches = [torch.randn(N, P, Hkv, D, device=DEVICE, generator=g).to(torch.bfloat16) for _ in range(2)]
    return positions, q.view(T, H, D), k.view(T, Hkv, D), v.view(T, Hkv, D), rope.cos_sin_cache, caches, slots


def check_bits() -> list[dict]:
    "rope_store_kv against rotary_embedding + triton_store_kv, compiled, bf16: q and both caches bit for bit."
    from mini_infer.kernels.triton_fused import rms_norm, rotary_embedding, ulp_distance
    from mini_infer.kernels.triton_paged_attention import triton_store_kv
    from mini_infer.kernels.triton_rope_cache import rope_store_kv
    rows = []
    for name, (H, Hkv, D) in HEADS.items():
        for T in ((1, 8, 256) if DEVICE == "cuda" else (1, 3)):
            positions, q, k, v, table, caches, slots = inputs(T, H, Hkv, D, seed=T)
            w = (1 + 0.3 * torch.randn(2, D, device=DEVICE)).to(torch.bfloat16)
            for qk_norm in (None, (w[0], w[1], 1e-6)) if name == "Qwen3-0.6B" else (None,):
                got, want = [c.clone() for c in caches], [c.clone() for c in caches]
                qn, kn = (q, k) if qk_norm is None else (rms_norm(q, w[0], 1e-6), rms_norm(k, w[1], 1e-6))
                q_want, k_rot = rotary_embedding(positions, qn, kn, table)
                triton_store_kv(*want, k_rot, v, slots)
                q_got = rope_store_kv(positions, q, k, v, table, *got, slots, qk_norm)
                ulps = [int(ulp_distance(a, b).max()) for a, b in ((q_got, q_want), (got[0], want[0]))]
                rows.append({"check": "bits", "shape": name, "qk_norm": qk_norm is not None, "T": T,
                             "q_max_ulp": ulps[0], "k_cache_max_ulp": ulps[1],
                             "v_cache_equal": torch.equal(got[1].view(torch.int16), want[1].view(torch.int16))})
    print_rows(rows)
    # the QK-norm's fp32 variance is a sum over a [heads, D] tile, not over one row: its order may differ
    bound = lambda r: 1 if r["qk_norm"] else 0
    if not all(max(r["q_max_ulp"], r["k_cache_max_ulp"]) <= bound(r) and r["v_cache_equal"] for r in rows):
        raise SystemExit("rope_store_kv differs from (rms_norm +) rotary_embedding + triton_store_kv")
    how = "compiled" if DEVICE == "cuda" else "Triton interpreter"
    print(f"rope_store_kv == rotary_embedding + triton_store_kv bit for bit, with QK-norm within 1 ulp "
          f"(bf16, {how}; measured above)")
    return rows


def rope_store_us() -> list[dict]:
    "Microseconds of the rotation + K/V write of one token, unfused (2 kernels) and fused (1), in a CUDA graph."
    from mini_infer.kernels.triton_fused import rms_norm, rotary_embedding
    from mini_infer.kernels.triton_paged_attention import triton_store_kv
    from mini_infer.kernels.triton_rope_cache import rope_store_kv
    rows = []
    for name, (H, Hkv, D) in HEADS.items():
        positions, q, k, v, table, caches, slots = inputs(1, H, Hkv, D)
        slots[0] = 7
        w = torch.ones(D, device=DEVICE, dtype=torch.bfloat16)
        norm = name == "Qwen3-0.6B"                                     # QK-norm: 4 kernels -> 1
        qn = (lambda: (rms_norm(q, w, 1e-6), rms_norm(k, w, 1e-6))) if norm else (lambda: (q, k))
        unfused = lambda: triton_store_kv(*caches, rotary_embedding(positions, *qn(), table)[1], v, slots)
        fused = lambda: rope_store_kv(positions, q, k, v, table, *caches, slots, (w, w, 1e-6) if norm else None)
        # 24 layers' worth in one graph
        us = [graphed_us([fn] * 24, eager=DEVICE != "cuda") for fn in (unfused, fused)]
        rows.append({"check": "(norm+)rope+store us, T=1", "shape": name, "qk_norm": norm,
                     "unfused_us": us[0], "fused_us": us[1], "saved_us": us[0] - us[1]})
    return rows


def kernel_names(fn) -> Counter:
    "The GPU kernels fn() launches, by name and count (torch.profiler); empty on the CPU."
    fn()
    if DEVICE != "cuda":
        return Counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
    return Counter(e.name for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA and "Memcpy" not in e.name
                   and "Memset" not in e.name)


def layer_kernels(shapes=("Qwen2.5-0.5B", "Qwen3-0.6B"), ctx: int = 1024) -> list[dict]:
    "Kernels and graph microseconds of one batch-1 decode layer (kernels='triton'), rope_store hook off and on."
    from mini_infer import LLM
    from mini_infer.kernels.triton_rope_cache import use_rope_store
    from mini_infer.layers.attention import build_metadata
    rows = []
    for shape in shapes:
        llm = LLM(config_dir(shape), dtype="bfloat16" if DEVICE == "cuda" else "float32", device=DEVICE, load_format="dummy", max_model_len=2048,
                  max_num_seqs=8, num_kv_blocks=1024, kernels="triton")
        layer, d, P = llm.model.model.layers[1], llm.model.config.hidden_size, llm.engine.block_size
        md = build_metadata([1], [ctx], [list(range(-(-ctx // P)))], P, device=DEVICE)
        pos = torch.tensor([ctx - 1], device=DEVICE)
        hidden, residual = torch.randn(2, 1, d, device=DEVICE, dtype=llm.engine.dtype)
        call = lambda: layer(pos, hidden, residual, md)
        for fused in (False, True):
            use_rope_store(llm.model, enable=fused)
            names = kernel_names(call)
            rows.append({"check": "one decode layer", "shape": shape, "fused_rope_store": fused,
                         "kernels": sum(names.values()),
                         "layer_us": graphed_us([call] * 8, eager=DEVICE != "cuda"),
                         "names": " ".join(f"{n.split('(')[0][:28]}x{c}" for n, c in sorted(names.items()))})
        del llm
        if DEVICE == "cuda":
            free_cuda()
    return rows


def report(layer_rows: list[dict], rope_rows: list[dict]) -> None:
    "Print the per-layer kernel counts and microseconds, the kernels by name, and the rope + store timing."
    print_rows([{k: v for k, v in r.items() if k != "names"} for r in layer_rows])
    for r in layer_rows:
        print(f"  {r['shape']} fused={r['fused_rope_store']}: {r['names']}")
    print_rows(rope_rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="CPU under TRITON_INTERPRET=1, a tiny shape")
    a = ap.parse_args()
    if a.smoke:                                  # checks that the script runs; its numbers mean nothing
        SHAPES["tiny"] = dict(SHAPES["Qwen3-0.6B"], vocab_size=512, hidden_size=64, intermediate_size=128,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
        a.out = a.out or tempfile.mkdtemp(prefix="fused_check_smoke-")
    run = {"env": env(), "bits": check_bits(), "layer": layer_kernels(("tiny",) if a.smoke else
                                                                      ("Qwen2.5-0.5B", "Qwen3-0.6B")),
           "rope_store": rope_store_us()}
    report(run["layer"], run["rope_store"])
    gpu = run["env"]["gpu"].lower().replace("nvidia ", "nvidia-").replace(" ", "-")
    path = out_dir(a.out) / f"{gpu}_fused_check_{run['env']['date']}.json"
    old = json.loads(path.read_text())["runs"] if path.exists() else []   # recorded runs are kept
    save("fused_check", {"env": run["env"], "runs": old + [run]}, a.out)


if __name__ == "__main__":
    main()
