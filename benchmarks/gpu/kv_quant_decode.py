"""Quantized-KV paged decode on one GPU (chapter 43a): correctness against the CPU reference path, then time per layer.

For each KV dtype (bf16: chapter 21a's kernel on a bf16 cache; fp8, turbo4, turbo3: chapter 43a's kernel reading the
quantized cache in place) at a few batch x context sizes of Qwen3-0.6B's and Qwen2.5-7B's attention shapes:
  - check: the write kernel's bytes against the codec's (share of equal code bytes, max relative scale difference),
    and the decode kernel against chapter 42's reference path (the same cache decoded by the codec, then
    reference_attention in fp32), max difference; fp32 bound 1e-5, bf16 bound 2e-3 + 2^-8 |ref| for fp8 and
    5e-3 + 2^-8 |ref| for TurboQuant (its codebook is rounded to bf16 for the tensor cores);
  - write: one layer's K/V write of 1, 256 and 2048 tokens, the Triton write kernel against chapter 42's codec path;
  - timing: one decode call per layer inside a CUDA graph over n layers with distinct caches (their K/V together
    exceed the 50 MB L2), as in chapter 21a's benchmark: backend_us (the whole backend: rotation of q, kernel,
    merge, rotation back, cast) and kernel_us (the kernel and merge alone), and the K/V bytes read per second.

    python benchmarks/gpu/kv_quant_decode.py [--quick] [--out DIR]      # on the H200 image (torch 2.11, triton 3.6)
    python benchmarks/gpu/kv_quant_decode.py --smoke [--out DIR]        # CPU, TRITON_INTERPRET=1, tiny shapes

Appends a run to <out>/<gpu>_kv_quant_decode_<date>.json (--out, else $OUT, else benchmarks/results); --smoke writes only
with --out (its times are the interpreter's and say nothing about a GPU). Exits with 1 when a bound is missed.
"""
import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
import types
from pathlib import Path

SMOKE = "--smoke" in sys.argv
if SMOKE:                                    # before any Triton kernel is defined: run them in numpy
    os.environ["TRITON_INTERPRET"] = "1"
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
if "mini_infer" not in sys.modules:          # the kernels without mini_infer/__init__ (no gguf on the GPU image)
    _pkg = types.ModuleType("mini_infer")
    _pkg.__path__ = [str(ROOT / "mini_infer")]
    sys.modules["mini_infer"] = _pkg

import torch  # noqa: E402
from common import graphed_us, print_rows  # noqa: E402
import triton  # noqa: E402

from mini_infer.engine_config import KV_CACHE_DTYPES  # noqa: E402
from mini_infer.kernels.triton_kv_quant import (TRITON_KV_QUANT, kernel_layout,  # noqa: E402
                                                quant_paged_decode)
from mini_infer.kernels.triton_paged_attention import num_decode_splits, triton_paged_attention  # noqa: E402
from mini_infer.layers.attention import build_metadata, reference_attention, store_kv  # noqa: E402
from mini_infer.quant.kv_quant import DequantizingBackend, QuantizedAttention, unpack_codes  # noqa: E402

MODELS = {"Qwen3-0.6B": (16, 8, 128), "Qwen2.5-7B": (28, 4, 128)}        # H, Hkv, D
QUANT = ("fp8", "turbo4", "turbo3")
P = 16
DEVICE = "cpu" if SMOKE else "cuda"


def make_layer(name, H, Hkv, D, lens, seed=0):
    "A QuantizedAttention of format `name` with random K/V of every sequence written by the codec; metadata."
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    layer = QuantizedAttention(H, Hkv, D, D ** -0.5, KV_CACHE_DTYPES.lookup(name),
                               DequantizingBackend(reference_attention))
    nbs = [-(-n // P) for n in lens]
    tables = torch.randperm(sum(nbs), generator=g, device=DEVICE).tolist()
    tables = [tables[sum(nbs[:i]):sum(nbs[:i + 1])] for i in range(len(lens))]
    layer.kv_cache = {n: torch.zeros(sum(nbs), P, *s.shape, dtype=s.dtype, device=DEVICE)
                      for n, s in layer.kv_streams().items()}
    slots = build_metadata(lens, lens, tables, P, device=DEVICE).slot_mapping
    kv = [torch.randn(sum(lens), Hkv, D, generator=g, device=DEVICE) for _ in range(2)]
    for stream, x, codec in (("k", kv[0], layer.key_codec), ("v", kv[1], layer.value_codec)):
        for suffix, part in codec.encode(x).items():
            store_kv(layer.kv_cache[stream + suffix], part, slots)
    md = build_metadata([1] * len(lens), lens, tables, P, device=DEVICE)
    return layer, md, kv, slots


def write_check(layer, kv, slots) -> dict:
    "The write kernel's streams against the codec's: share of equal code bytes, max relative scale difference."
    want = {n: t.clone() for n, t in layer.kv_cache.items()}
    md = types.SimpleNamespace(slot_mapping=slots)
    TRITON_KV_QUANT.write(layer, kv[0].bfloat16(), kv[1].bfloat16(), md)   # bf16 rows, as a model hands them
    cpu = {n: c.encode(x.bfloat16()) for n, c, x in (("k", layer.key_codec, kv[0]), ("v", layer.value_codec, kv[1]))}
    lay, same, total, rel = kernel_layout(layer), 0, 0, 0.0
    for stream in ("k", "v"):
        got = layer.kv_cache[stream].flatten(0, 1)[slots]                           # [T, Hkv, nbytes]
        codes = [t if lay.bits == 8 else unpack_codes(t, lay.bits, layer.head_dim) for t in (got, cpu[stream][""])]
        same, total = same + int((codes[0] == codes[1]).sum()), total + codes[0].numel()
        s_got = layer.kv_cache[stream + lay.scale_suffix].flatten(0, 1)[slots]
        s_want = cpu[stream][lay.scale_suffix]
        rel = max(rel, ((s_got - s_want).abs() / s_want.abs().clamp_min(1e-30)).max().item())
    layer.kv_cache = want
    return dict(codes_equal=same / total, scale_max_rel=rel)


def check(quick: bool) -> list[dict]:
    "Decode kernel against the reference path on the same quantized cache; the write kernel against the codec."
    cases = [(3, 40), (2, 20)] if SMOKE else [(1, 4096), (16, 1024), (64, 512)] if quick else \
        [(1, 8192), (4, 4096), (16, 2048), (64, 1024), (256, 512)]
    models = {"tiny": (8, 2, 32)} if SMOKE else MODELS
    rows = []
    torch.manual_seed(0)
    for model, (H, Hkv, D) in models.items():
        for B, ctx in cases:
            lens = [ctx] + [max(1, ctx // 2 + 7 * i) for i in range(B - 1)]
            for name in QUANT:
                layer, md, kv, slots = make_layer(name, H, Hkv, D, lens)
                row = dict(model=model, B=B, ctx=ctx, kv=name, **write_check(layer, kv, slots))
                q = torch.randn(B, H, D, device=DEVICE)
                for dtype in (torch.float32, torch.bfloat16):
                    qd = q.to(dtype)
                    ref = layer.backend(qd.float(), layer, md)                     # decoded cache, fp32
                    md.scratch.clear()
                    got = TRITON_KV_QUANT(qd, layer, md).float()
                    md.scratch.clear()
                    err = (got - ref).abs()
                    bound = 1e-5 if dtype == torch.float32 else (2e-3 if name == "fp8" else 5e-3) + 2 ** -8 * ref.abs()
                    key = str(dtype).split(".")[1]
                    row[f"{key}_max_diff"] = err.max().item()
                    row[f"{key}_ok"] = bool((err <= bound).all()) and not got.isnan().any().item()
                rows.append(row)
                print(row, flush=True)
    return rows


def timing(quick: bool) -> list[dict]:
    "One decode call per layer for bf16 and each quantized format, graphed over n layers of distinct caches."
    cases = [(2, 40)] if SMOKE else [(1, 8192), (64, 1024), (256, 1024)] if quick else \
        [(1, 8192), (16, 2048), (64, 1024), (256, 512), (256, 1024), (256, 4096)]
    models = {"tiny": (8, 2, 32)} if SMOKE else MODELS
    rows = []
    for model, (H, Hkv, D) in models.items():
        for B, ctx in cases:
            lens, nb = [ctx] * B, B * (-(-ctx // P))
            md = build_metadata([1] * B, lens, [list(range(i * nb // B, (i + 1) * nb // B)) for i in range(B)], P,
                                device=DEVICE)
            q = torch.randn(B, H, D, device=DEVICE, dtype=torch.bfloat16)
            bf16_bytes = 2 * B * ctx * Hkv * D * 2
            n = 1 if SMOKE else min(64, max(4, -(-(1 << 30) // bf16_bytes)))
            k_pool = torch.randn(n, nb, P, Hkv, D, device=DEVICE, dtype=torch.bfloat16)
            v_pool = torch.randn_like(k_pool)
            us = graphed_us([lambda i=i: triton_paged_attention(q, k_pool[i], v_pool[i], md, D ** -0.5)
                             for i in range(n)], eager=SMOKE)
            del k_pool, v_pool
            bf16_us = us
            rows.append(dict(model=model, B=B, ctx=ctx, kv="bf16", layers=n, backend_us=us, kernel_us=us,
                             kv_mb=bf16_bytes / 1e6, gb_s=bf16_bytes / us / 1e3, vs_bf16=1.0))
            for name in QUANT:
                layers = []
                for _ in range(n):
                    layer = QuantizedAttention(H, Hkv, D, D ** -0.5, KV_CACHE_DTYPES.lookup(name), TRITON_KV_QUANT)
                    layer.kv_cache = {s: (torch.randint(0, 256, (nb, P, *sp.shape), dtype=torch.uint8, device=DEVICE)
                                          if sp.dtype == torch.uint8 else
                                          torch.rand(nb, P, *sp.shape, device=DEVICE) * 0.01 + 0.01)
                                      for s, sp in layer.kv_streams().items()}
                    if name == "fp8":                                   # no NaN byte patterns (0x7F, 0xFF)
                        for s in ("k", "v"):
                            layer.kv_cache[s] &= 0x77
                    layers.append(layer)
                lay = kernel_layout(layers[0])
                nbytes = 2 * B * ctx * Hkv * (lay.nbytes + 4)
                us = graphed_us([lambda i=i: TRITON_KV_QUANT(q, layers[i], md) for i in range(n)], eager=SMOKE)
                _, lut, _, rot = TRITON_KV_QUANT.constants(layers[0], q.device)
                q_rot = (q.float() @ rot.T if lay.rotation is not None else q.float()).contiguous()
                splits = 1 if SMOKE else None
                if splits is None:
                    splits = num_decode_splits(B, Hkv, ctx, torch.cuda.get_device_properties(0).multi_processor_count)
                k_us = graphed_us([lambda i=i: quant_paged_decode(q_rot, layers[i], md, lay, lut, splits, 64, True,
                                                                  None if SMOKE else triton.language.bfloat16)
                                   for i in range(n)], eager=SMOKE)
                rows.append(dict(model=model, B=B, ctx=ctx, kv=name, layers=n, backend_us=us, kernel_us=k_us,
                                 kv_mb=nbytes / 1e6, gb_s=nbytes / k_us / 1e3, vs_bf16=bf16_us / us))
                del layers
            for r in rows[-4:]:
                print(r, flush=True)
    return rows


def eager_us(fn) -> float:
    "Median time of one eager call, in microseconds (one timed call under the interpreter)."
    fn()
    if SMOKE:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    from triton.testing import do_bench
    return do_bench(fn, return_mode="median") * 1e3


def write_timing() -> list[dict]:
    "One layer's K/V write of a prefill step: the Triton write kernel against chapter 42's codec + store_kv path."
    models = {"tiny": (8, 2, 32)} if SMOKE else MODELS
    rows = []
    for model, (H, Hkv, D) in models.items():
        for T in ((20,) if SMOKE else (1, 256, 2048)):
            k, v = (torch.randn(T, Hkv, D, device=DEVICE, dtype=torch.bfloat16) for _ in range(2))
            slots = torch.randperm(-(-T // P) * P, device=DEVICE)[:T]
            md = types.SimpleNamespace(slot_mapping=slots)
            for name in QUANT:
                layer = QuantizedAttention(H, Hkv, D, D ** -0.5, KV_CACHE_DTYPES.lookup(name), TRITON_KV_QUANT)
                layer.kv_cache = {s: torch.zeros(-(-T // P), P, *sp.shape, dtype=sp.dtype, device=DEVICE)
                                  for s, sp in layer.kv_streams().items()}

                def codec_write():
                    for stream, x, codec in (("k", k, layer.key_codec), ("v", v, layer.value_codec)):
                        for suffix, part in codec.encode(x).items():
                            store_kv(layer.kv_cache[stream + suffix], part, slots)
                rows.append(dict(model=model, tokens=T, kv=name,
                                 kernel_us=eager_us(lambda: TRITON_KV_QUANT.write(layer, k, v, md)),
                                 codec_us=eager_us(codec_write)))
                print(rows[-1], flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--smoke", action="store_true", help="CPU, TRITON_INTERPRET=1, tiny shapes (CI)")
    p.add_argument("--out", default=None, help="folder of the JSON file (default benchmarks/results; --smoke: none)")
    a = p.parse_args()
    if not SMOKE and not torch.cuda.is_available():
        raise SystemExit("kv_quant_decode needs a CUDA GPU (or --smoke for the CPU interpreter)")
    gpu = "cpu-smoke" if SMOKE else torch.cuda.get_device_name()
    env = f"python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}, {gpu}"
    print(env)
    run = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "env": env, "smoke": SMOKE}
    run["correctness"] = check(a.quick)
    print("\ncorrectness: write kernel vs codec; decode kernel vs the reference path (fp32 and bf16 queries)")
    print_rows(run["correctness"])
    run["timing"] = timing(a.quick)
    print("\ndecode attention per layer, P=16 (backend_us: whole backend in a CUDA graph of `layers` distinct caches; "
          "kernel_us: the kernel and merge alone; gb_s: K/V bytes read (scales included) / kernel_us; vs_bf16: "
          "bf16 backend time / this backend's time)")
    print_rows(run["timing"])
    run["write"] = write_timing()
    print("\nK/V write of one layer, bf16 rows (kernel_us: quant_store_kernel, one launch; codec_us: chapter 42's "
          "encode + one store_kv per part; eager, median)")
    print_rows(run["write"])
    if a.out is not None or not SMOKE:
        out = Path(a.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
        out.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
        path = out / f"{slug}_kv_quant_decode_{datetime.date.today().isoformat()}.json"
        data = json.loads(path.read_text()) if path.exists() else {"benchmark": "kv_quant_decode", "device": gpu,
                                                                   "runs": []}
        data["runs"].append(run)
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"\nwrote {path}")
    if not all(r["float32_ok"] and r["bfloat16_ok"] for r in run["correctness"]):
        raise SystemExit("a correctness bound was missed (see the table)")


if __name__ == "__main__":
    main()
