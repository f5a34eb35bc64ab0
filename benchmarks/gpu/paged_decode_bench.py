"""Triton paged-attention decode on one GPU: correctness against reference_attention, then achieved bandwidth.

Run from the repository root on a CUDA machine (under 30 s on an H200, about 80 s with --sweep):
    python benchmarks/gpu/paged_decode_bench.py [--quick] [--sweep] [--out benchmarks/results]
Prints the tables and writes <out>/<gpu>_paged_decode_<date>.json (every run of the day is kept). Exits with 1 when a
correctness bound is missed. Needs only torch and triton (the chapter nbs/21a_triton_paged_attention.ipynb has the
same checks as `#| cuda` cells).
"""
import argparse
import datetime
import json
import platform
import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# mini_infer/__init__.py imports the whole engine (gguf, jinja2, tokenizers), which a bare GPU image may lack. The
# kernels need none of it: register the package without running its __init__, then import the modules directly.
if "mini_infer" not in sys.modules:
    _pkg = types.ModuleType("mini_infer")
    _pkg.__path__ = [str(ROOT / "mini_infer")]
    sys.modules["mini_infer"] = _pkg

import torch  # noqa: E402
import triton  # noqa: E402
from triton.testing import do_bench  # noqa: E402
from common import graphed_us, print_rows  # noqa: E402

from mini_infer.kernels.triton_paged_attention import (num_decode_splits, paged_decode,  # noqa: E402
                                                       triton_paged_attention)
from mini_infer.layers.attention import build_metadata, reference_attention  # noqa: E402

MODELS = {"Qwen2.5-7B": (28, 4, 128), "Qwen2.5-0.5B": (14, 2, 64)}       # H, Hkv, D
P = 16


def make_batch(lens, H, Hkv, D, dtype, seed=0, spare=4):
    "q [B, H, D] and paged caches [N, P, Hkv, D] with scattered blocks; every unwritten slot holds NaN."
    g = torch.Generator(device="cuda").manual_seed(seed)
    nbs = [-(-n // P) for n in lens]
    perm = torch.randperm(sum(nbs) + spare, generator=g, device="cuda").tolist()
    tables = [perm[sum(nbs[:i]):sum(nbs[:i + 1])] for i in range(len(lens))]
    caches = []
    for _ in range(2):
        c = torch.randn(len(perm), P, Hkv, D, generator=g, device="cuda").to(dtype)
        c[perm[sum(nbs):]] = float("nan")                                 # free blocks
        for n, t in zip(lens, tables):
            c[t[-1], (n - 1) % P + 1:] = float("nan")                     # the unwritten end of each last block
        caches.append(c)
    q = torch.randn(len(lens), H, D, generator=g, device="cuda").to(dtype)
    return q, caches[0], caches[1], build_metadata([1] * len(lens), lens, tables, P, device="cuda")


def random_lens(B, ctx, seed=0):
    "B context lengths in ctx/2..ctx, the first one exactly ctx."
    g = torch.Generator().manual_seed(seed)
    return [ctx] + torch.randint(ctx // 2, ctx + 1, (B - 1,), generator=g).tolist()


def check(quick: bool) -> list[dict]:
    "Kernel against the fp32 reference on the same inputs: fp32 within 1e-5, bf16 within 2e-3 + 2^-8 |ref|."
    cases = [(1, 8192, None), (4, 4096, None), (16, 2048, None), (64, 1024, None), (256, 512, None), (16, 4096, 1024)]
    if quick:
        cases = cases[:1] + cases[-2:]
    rows = []
    for name, (H, Hkv, D) in MODELS.items():
        for B, ctx, window in cases:
            for dtype in (torch.float32, torch.bfloat16):
                q, kc, vc, md = make_batch(random_lens(B, ctx), H, Hkv, D, dtype)
                ref = reference_attention(q.float(), kc.float(), vc.float(), md, D ** -0.5, window)
                got = triton_paged_attention(q, kc, vc, md, D ** -0.5, window).float()
                err = (got - ref).abs()
                row = dict(model=name, B=B, ctx=ctx, window=window, dtype=str(dtype).split(".")[1],
                           max_diff=err.max().item(), nan=bool(got.isnan().any()))
                if dtype == torch.float32:
                    row["ok"] = not row["nan"] and row["max_diff"] <= 1e-5
                else:
                    row["ok"] = not row["nan"] and bool((err <= 2e-3 + 2 ** -8 * ref.abs()).all())
                    row["correctly_rounded"] = (got == ref.to(dtype).float()).float().mean().item()
                    one = torch.empty_like(q)
                    seq_ids = torch.arange(B, dtype=torch.int32, device="cuda")
                    sms = torch.cuda.get_device_properties(0).multi_processor_count
                    splits = num_decode_splits(B, Hkv, min(ctx, window or ctx), sms)
                    paged_decode(q, kc, vc, md, seq_ids, D ** -0.5, window, one, splits, split_p=False)
                    row["max_diff_p_rounded_once"] = (one.float() - ref).abs().max().item()
                rows.append(row)
                del q, kc, vc, md, ref, got
    return rows


def copy_bandwidth() -> float:
    "Device-to-device copy of 1 GiB, GB/s counting read + write (median of do_bench)."
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / do_bench(lambda: dst.copy_(src), return_mode="median") / 1e6


def layer_caches(B, ctx, H, Hkv, D, dtype=torch.bfloat16):
    "q, metadata and K/V pools [n, N, P, Hkv, D] of n 'layers', n large enough that the K/V of all exceed the L2."
    q, kc, vc, md = make_batch([ctx] * B, H, Hkv, D, dtype)
    n = min(256, max(4, -(-(512 << 20) // (2 * kc.numel() * kc.element_size()))))
    k_pool = torch.randn(n, *kc.shape, device="cuda", dtype=dtype)
    v_pool = torch.randn(n, *kc.shape, device="cuda", dtype=dtype)
    return q, md, k_pool, v_pool


def timing(copy_bw: float, quick: bool) -> list[dict]:
    """One decode call per layer (bf16, uniform contexts): eager time, and time inside a CUDA graph of n layers with
    distinct caches (as in a real step), with the K/V bandwidth that reaches; dense SDPA on unpaged K/V beside it."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    batches, ctxs = ([1, 64, 256], [512, 8192]) if quick else ([1, 4, 16, 64, 256], [512, 2048, 8192])
    rows = []
    for name, (H, Hkv, D) in MODELS.items():
        for B in batches:
            for ctx in ctxs:
                q, md, k_pool, v_pool = layer_caches(B, ctx, H, Hkv, D)
                scale = D ** -0.5
                eager = do_bench(lambda: triton_paged_attention(q, k_pool[0], v_pool[0], md, scale),
                                 return_mode="median") * 1e3
                us = graphed_us([lambda i=i: triton_paged_attention(q, k_pool[i], v_pool[i], md, scale)
                                 for i in range(len(k_pool))])
                n = len(k_pool)
                del k_pool, v_pool
                kv_bytes = 2 * B * ctx * Hkv * D * 2
                k_dense = torch.randn(n, B, Hkv, ctx, D, device="cuda", dtype=torch.bfloat16)
                v_dense = torch.randn(n, B, Hkv, ctx, D, device="cuda", dtype=torch.bfloat16)
                qs = q[:, :, None]                                          # [B, H, 1, D]
                sdpa = graphed_us([lambda i=i: torch.nn.functional.scaled_dot_product_attention(
                    qs, k_dense[i], v_dense[i], enable_gqa=True) for i in range(n)])
                del k_dense, v_dense
                rows.append(dict(model=name, B=B, ctx=ctx, splits=num_decode_splits(B, Hkv, ctx, sms),
                                 eager_us=eager, graph_us=us, gb_s=kv_bytes / us / 1e3,
                                 of_copy=kv_bytes / us / 1e3 / copy_bw, sdpa_dense_us=sdpa))
    return rows


def sweep() -> list[dict]:
    "Graphed time of paged_decode around the defaults (the split rule, 128-key tiles, 3 stages) at a few shapes."
    rows = []
    shapes = [("Qwen2.5-7B", 1, 8192), ("Qwen2.5-7B", 4, 8192), ("Qwen2.5-7B", 16, 2048), ("Qwen2.5-7B", 64, 2048),
              ("Qwen2.5-7B", 256, 2048), ("Qwen2.5-0.5B", 1, 8192), ("Qwen2.5-0.5B", 16, 2048),
              ("Qwen2.5-0.5B", 64, 512), ("Qwen2.5-0.5B", 256, 512)]
    for name, B, ctx in shapes:
        H, Hkv, D = MODELS[name]
        q, md, k_pool, v_pool = layer_caches(B, ctx, H, Hkv, D)
        out, seq_ids = torch.empty_like(q), torch.arange(B, dtype=torch.int32, device="cuda")
        rule = num_decode_splits(B, Hkv, ctx, torch.cuda.get_device_properties(0).multi_processor_count)
        configs = [dict(num_splits=s) for s in (1, 2, 4, 8, 16, 32, 64) if s == 1 or s * 128 <= ctx]
        configs += [dict(split_p=False)] + [dict(block_n=bn, num_stages=st, num_warps=w) for bn in (64, 128)
                                            for st in (2, 3) for w in (4, 8)]
        for cfg in configs:
            kw = dict(num_splits=rule, block_n=128, split_p=True, num_warps=4, num_stages=3) | cfg
            us = graphed_us([lambda i=i: paged_decode(q, k_pool[i], v_pool[i], md, seq_ids, D ** -0.5, None, out, **kw)
                             for i in range(len(k_pool))])
            rows.append(dict(model=name, B=B, ctx=ctx, **kw, us=us, gb_s=2 * B * ctx * Hkv * D * 2 / us / 1e3))
        best = min(rows[-len(configs):], key=lambda r: r["us"])
        print("sweep best:", best, flush=True)
        del q, md, k_pool, v_pool
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--sweep", action="store_true", help="also time every splits x tile size at a few shapes")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="folder of the JSON file")
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("paged_decode_bench needs a CUDA GPU")
    gpu = torch.cuda.get_device_name()
    env = f"python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}, {gpu}"
    print(env)
    run = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "env": env}
    run["correctness"] = check(a.quick)
    print("\ncorrectness (fp32 bound 1e-5; bf16 bound 2e-3 + 2^-8 |ref|, against fp32 on the same bf16 inputs)")
    print_rows(run["correctness"])
    run["copy_gb_s"] = copy_bandwidth()
    print(f"\ndevice copy bandwidth (read + write): {run['copy_gb_s']:,.0f} GB/s")
    run["timing"] = timing(run["copy_gb_s"], a.quick)
    print("\ndecode attention, bf16, P=16, per layer (graph_us: median of do_bench over a CUDA graph of n layers with "
          "distinct caches; gb_s: K/V bytes read / graph_us; eager_us: one call without a graph)")
    print_rows(run["timing"])
    if a.sweep:
        run["sweep"] = sweep()
        print("\nsweep of paged_decode (bf16)")
        print_rows(run["sweep"])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    path = out / f"{slug}_paged_decode_{datetime.date.today().isoformat()}.json"
    data = json.loads(path.read_text()) if path.exists() else {"benchmark": "paged_decode", "device": gpu, "runs": []}
    data["runs"].append(run)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nwrote {path}")
    if not all(r["ok"] for r in run["correctness"]):
        raise SystemExit("a correctness bound was missed (see the table)")


if __name__ == "__main__":
    main()
