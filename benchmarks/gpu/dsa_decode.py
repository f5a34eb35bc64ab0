"""DSA decode vs dense MLA decode at a 32k context on one GPU (issue 16), PyTorch only (gather, no custom kernel):
one decode step of one layer's attention, absorbed MLA over the latent cache, DeepSeek-V3.2 shape (H 128, R 512,
Dr 64, indexer 64 heads x 128, top-k 2048), bf16, batch B. Dense: scores over all L latents. DSA: the indexer's
scores over all L index keys (Eq. 1), top-k, a gather of k latents, attention over them (Eq. 2). CUDA-event timed,
median of 50 after warm-up. PyTorch gather because it needs no kernel of ours and shows the arithmetic/bytes gap
already; a fused FlashMLA-style sparse kernel would do better.

    python benchmarks/gpu/dsa_decode.py --out DIR [--context 32768] [--batch 1 8 32]
"""
import argparse, json, os, time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--out", default=".")
p.add_argument("--context", type=int, default=32768)
p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
args = p.parse_args()
dev = "cuda" if torch.cuda.is_available() else "cpu"
dt = torch.bfloat16 if dev == "cuda" else torch.float32
H, R, Dr, HI, DI, K = 128, 512, 64, 64, 128, 2048
L = args.context if dev == "cuda" else 4096
scale = (128 + 64) ** -0.5


def dense(q, kv):                                   # q [B, H, R+Dr], kv [B, L, R+Dr]
    s = torch.matmul(q, kv.transpose(1, 2)) * scale                  # [B, H, L]
    return torch.matmul(torch.softmax(s, -1, dtype=torch.float32).to(q.dtype), kv[..., :R])   # [B, H, R]


def sparse(q, kv, qi, w, ki):                       # qi [B, HI, DI], w [B, HI], ki [B, L, DI]
    idx = torch.matmul(w.unsqueeze(1), F.relu(torch.matmul(qi, ki.transpose(1, 2)))).squeeze(1)   # [B, L], Eq. 1
    top = idx.topk(K, dim=-1).indices                                                           # [B, K]
    sel = torch.gather(kv, 1, top[..., None].expand(-1, -1, kv.shape[-1]))                      # [B, K, R+Dr]
    return dense(q, sel)                                                                         # Eq. 2


def timed(fn, *a, n=50):
    for _ in range(5):
        fn(*a)
    if dev != "cuda":
        t = time.perf_counter(); [fn(*a) for _ in range(5)]; return (time.perf_counter() - t) / 5 * 1e3
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(*a); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    return sorted(ts)[len(ts) // 2]


rows = []
with torch.no_grad():
    for B in args.batch:
        g = torch.Generator(device=dev).manual_seed(0)
        r = lambda *s: torch.randn(*s, device=dev, dtype=dt, generator=g)
        q, kv, qi, w, ki = r(B, H, R + Dr), r(B, L, R + Dr), r(B, HI, DI), r(B, HI), r(B, L, DI)
        td, ts = timed(dense, q, kv), timed(sparse, q, kv, qi, w, ki)
        rows.append(dict(batch=B, context=L, dense_ms=td, dsa_ms=ts, speedup=td / ts))
        print(f"B={B:3d} L={L}: dense MLA {td:.3f} ms, DSA (indexer+top-k+gather+attn) {ts:.3f} ms, {td / ts:.2f}x",
              flush=True)
run = dict(bench="dsa_decode", device=torch.cuda.get_device_name() if dev == "cuda" else "cpu",
           torch=torch.__version__, dtype=str(dt), shape=dict(H=H, R=R, Dr=Dr, HI=HI, DI=DI, K=K),
           method="pytorch gather", time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), rows=rows)
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "dsa_decode.json"), "w") as f:
    json.dump(run, f, indent=1)
