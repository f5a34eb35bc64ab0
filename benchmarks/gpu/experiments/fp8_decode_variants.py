"""Why chapter 43a's fp8 decode kernel reads K/V at ~1.35 TB/s where chapter 21a's bf16 kernel reads ~3.7 TB/s.

A copy of the fp8 path of `quant_decode_kernel` with knobs, timed in CUDA graphs over distinct caches (as
benchmarks/gpu/kv_quant_decode.py does) against the bf16 kernel at the same shapes:
  CVT      0: e4m3 -> fp32 -> dot dtype (chapter 43a today); 1: e4m3 -> bf16 directly
  SPLIT_P  two bf16 products for p @ V (p = p_hi + p_lo) or one
  SCALES   0: no per-token scales read (the cost of the scale gathers); 1: per token and head, as stored
  block_n, num_warps, num_stages
Each variant is checked against the current kernel's output (max difference printed). An experiment: the winner
goes into chapter 43a.

    python benchmarks/gpu/experiments/fp8_decode_variants.py [--out DIR]      # H200, ~1-2 min
"""
import itertools
import json
import os
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
if "mini_infer" not in sys.modules:
    _pkg = types.ModuleType("mini_infer")
    _pkg.__path__ = [str(ROOT / "mini_infer")]
    sys.modules["mini_infer"] = _pkg

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from common import graphed_us  # noqa: E402

from mini_infer.engine_config import KV_CACHE_DTYPES  # noqa: E402
from mini_infer.kernels.triton_kv_quant import TRITON_KV_QUANT, quant_paged_decode, kernel_layout  # noqa: E402
from mini_infer.kernels.triton_paged_attention import (num_decode_splits, paged_decode_combine_kernel,  # noqa: E402
                                                       triton_paged_attention)
from mini_infer.layers.attention import build_metadata  # noqa: E402
from mini_infer.quant.kv_quant import QuantizedAttention  # noqa: E402


@triton.jit
def fp8_kernel(q_ptr, k_ptr, ks_ptr, v_ptr, vs_ptr, block_tables_ptr, seq_lens_ptr, out_ptr, part_out_ptr,
               part_m_ptr, part_l_ptr, scale, stride_bt,
               NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
               BLOCK_SIZE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, CVT: tl.constexpr,
               SPLIT_P: tl.constexpr, SCALES: tl.constexpr, IS_SPLIT: tl.constexpr):
    i, kv_head, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    num_splits = tl.num_programs(2)
    length = tl.load(seq_lens_ptr + i)
    num_tiles = tl.cdiv(length, BLOCK_N)
    tiles_per_split = tl.cdiv(num_tiles, num_splits)
    t_begin = split * tiles_per_split
    t_end = tl.minimum(t_begin + tiles_per_split, num_tiles)
    offs_g, offs_d = tl.arange(0, BLOCK_G), tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUP + offs_g
    g_mask = offs_g[:, None] < GROUP
    q = tl.load(q_ptr + (i * NUM_HEADS + heads[:, None]) * HEAD_DIM + offs_d[None, :], mask=g_mask,
                other=0.0).to(tl.bfloat16)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    for t in range(t_begin, t_end):
        offs_n = t * BLOCK_N + tl.arange(0, BLOCK_N)
        valid = offs_n < length
        block_ids = tl.load(block_tables_ptr + i * stride_bt + offs_n // BLOCK_SIZE, mask=valid, other=0)
        rows = (block_ids.to(tl.int64) * BLOCK_SIZE + offs_n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
        kb = tl.load(k_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=valid[:, None], other=0)
        if CVT == 0:
            k = kb.to(tl.float8e4nv, bitcast=True).to(tl.float32).to(tl.bfloat16)
        else:
            k = kb.to(tl.float8e4nv, bitcast=True).to(tl.bfloat16)
        s = tl.dot(q, tl.trans(k))
        if SCALES:
            ksc = tl.load(ks_ptr + rows, mask=valid, other=0.0)
            s = s * (ksc * scale)[None, :]
        else:
            s = s * scale
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        vb = tl.load(v_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=valid[:, None], other=0)
        if CVT == 0:
            v = vb.to(tl.float8e4nv, bitcast=True).to(tl.float32).to(tl.bfloat16)
        else:
            v = vb.to(tl.float8e4nv, bitcast=True).to(tl.bfloat16)
        if SCALES:
            vsc = tl.load(vs_ptr + rows, mask=valid, other=0.0)
            pw = p * vsc[None, :]
        else:
            pw = p
        p_hi = pw.to(tl.bfloat16)
        pv = tl.dot(p_hi, v)
        if SPLIT_P:
            pv += tl.dot((pw - p_hi.to(tl.float32)).to(tl.bfloat16), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    if IS_SPLIT:
        part = (i * NUM_HEADS + heads) * num_splits + split
        tl.store(part_out_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=g_mask)
        tl.store(part_m_ptr + part, m_i, mask=offs_g < GROUP)
        tl.store(part_l_ptr + part, l_i, mask=offs_g < GROUP)
    else:
        tl.store(out_ptr + (i * NUM_HEADS + heads[:, None]) * HEAD_DIM + offs_d[None, :], acc / l_i[:, None],
                 mask=g_mask)


def variant(q, layer, md, splits, cvt, split_p, scales, block_n, warps, stages):
    (t, h, d), hkv = q.shape, layer.num_kv_heads
    out = torch.empty(t, h, d, dtype=torch.float32, device=q.device)
    part_out = part_m = part_l = out
    if splits > 1:
        part_out = torch.empty(t, h, splits, d, dtype=torch.float32, device=q.device)
        part_m = torch.empty(t, h, splits, dtype=torch.float32, device=q.device)
        part_l = torch.empty_like(part_m)
    c = layer.kv_cache
    fp8_kernel[(t, hkv, splits)](q, c["k"], c["k_scale"], c["v"], c["v_scale"], md.block_tables, md.seq_lens, out,
                                 part_out, part_m, part_l, layer.scale, md.block_tables.stride(0),
                                 NUM_HEADS=h, NUM_KV_HEADS=hkv, GROUP=h // hkv, HEAD_DIM=d, BLOCK_SIZE=md.block_size,
                                 BLOCK_G=max(16, triton.next_power_of_2(h // hkv)), BLOCK_N=block_n, CVT=cvt,
                                 SPLIT_P=split_p, SCALES=scales, IS_SPLIT=splits > 1, num_warps=warps,
                                 num_stages=stages)
    if splits > 1:
        rows = torch.arange(t, dtype=torch.int32, device=q.device)
        paged_decode_combine_kernel[(t, h)](part_out, part_m, part_l, out, rows, rows, splits, h * d, d, HEAD_DIM=d,
                                            BLOCK_S=triton.next_power_of_2(splits), BLOCK_D=d)
    return out


def main():
    P = 16
    rows = []
    cases = [("Qwen3-0.6B", 16, 8, 128, 256, 1024), ("Qwen3-0.6B", 16, 8, 128, 64, 1024),
             ("Qwen3-0.6B", 16, 8, 128, 1, 8192), ("Qwen2.5-7B", 28, 4, 128, 64, 1024)]
    grid = [dict(cvt=0, split_p=1, scales=1, block_n=64, warps=4, stages=3)]          # the chapter's kernel today
    grid += [dict(cvt=c, split_p=sp, scales=sc, block_n=bn, warps=w, stages=st)
             for c, sp, sc, bn, w, st in itertools.product((1,), (0, 1), (0, 1), (32, 64, 128), (4, 8), (3,))]
    for model, H, Hkv, D, B, ctx in cases:
        lens, nb = [ctx] * B, B * (-(-ctx // P))
        md = build_metadata([1] * B, lens, [list(range(i * nb // B, (i + 1) * nb // B)) for i in range(B)], P,
                            device="cuda")
        q = torch.randn(B, H, D, device="cuda", dtype=torch.bfloat16)
        bf16_bytes = 2 * B * ctx * Hkv * D * 2
        n = min(64, max(4, -(-(1 << 30) // bf16_bytes)))
        k_pool = torch.randn(n, nb, P, Hkv, D, device="cuda", dtype=torch.bfloat16)
        v_pool = torch.randn_like(k_pool)
        bf16_us = graphed_us([lambda i=i: triton_paged_attention(q, k_pool[i], v_pool[i], md, D ** -0.5)
                              for i in range(n)])
        del k_pool, v_pool
        layers = []
        for _ in range(n):
            layer = QuantizedAttention(H, Hkv, D, D ** -0.5, KV_CACHE_DTYPES.lookup("fp8"), TRITON_KV_QUANT)
            layer.kv_cache = {s: (torch.randint(0, 256, (nb, P, *sp.shape), dtype=torch.uint8, device="cuda") & 0x77
                                  if sp.dtype == torch.uint8 else torch.rand(nb, P, *sp.shape, device="cuda") * 0.01
                                  + 0.01) for s, sp in layer.kv_streams().items()}
            layers.append(layer)
        splits = num_decode_splits(B, Hkv, ctx, torch.cuda.get_device_properties(0).multi_processor_count)
        lay = kernel_layout(layers[0])
        _, lut, _, _ = TRITON_KV_QUANT.constants(layers[0], q.device)
        qf = q.float().contiguous()
        ref = quant_paged_decode(qf, layers[0], md, lay, lut, splits, 64, True, tl.bfloat16)
        backend_us = graphed_us([lambda i=i: TRITON_KV_QUANT(q, layers[i], md) for i in range(n)])
        fp8_bytes = 2 * B * ctx * Hkv * (D + 4)
        print(f"\n{model} B={B} ctx={ctx} splits={splits} layers={n}: bf16 {bf16_us:.1f} us "
              f"({bf16_bytes / bf16_us / 1e3:.0f} GB/s), fp8 backend today {backend_us:.1f} us", flush=True)
        base = dict(model=model, B=B, ctx=ctx, splits=splits, bf16_us=bf16_us, backend_us=backend_us)
        for g in grid:
            try:
                got = variant(qf, layers[0], md, splits, **g)
                diff = (got - ref).abs().max().item() if g["scales"] else None
                us = graphed_us([lambda i=i: variant(qf, layers[i], md, splits, **g) for i in range(n)])
            except Exception as e:                                   # a config that does not compile
                print(g, "failed:", str(e)[:200], flush=True)
                continue
            r = dict(base, **g, us=us, gb_s=fp8_bytes / us / 1e3, vs_bf16=bf16_us / us, max_diff=diff)
            rows.append(r)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items() if k not in base},
                  flush=True)
        best = max((r for r in rows if r["B"] == B and r["model"] == model and r["scales"]), key=lambda r: r["vs_bf16"])
        print("best with scales:", {k: best[k] for k in ("cvt", "split_p", "block_n", "warps", "stages", "us",
                                                        "vs_bf16", "max_diff")}, flush=True)
        del layers
    out = Path(os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    path = out / f"nvidia-h200_fp8_decode_variants_{time.strftime('%Y-%m-%d')}.json"
    data = json.loads(path.read_text()) if path.exists() else {"benchmark": "fp8_decode_variants", "runs": []}
    data["runs"].append({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": os.environ.get("MINI_INFER_COMMIT"),
                         "command": "python benchmarks/gpu/experiments/fp8_decode_variants.py", "rows": rows})
    path.write_text(json.dumps(data, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
