"""Where a V4-Flash-shaped bf16 prefill spends its time on the GPU (issue 17 item 7 debugging): the engine's
steps one by one, each timed, with Python stacks dumped every 30 s (faulthandler) if a step takes that long.

    python benchmarks/gpu/experiments/v4_prefill_probe.py --context 2048 [--layers 4] [--chunk 4096]
"""
import argparse, faulthandler, json, sys, tempfile, time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import deepseek_v4 as B                                            # noqa: E402
from mini_infer import LLM, SamplingParams                       # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--context", type=int, default=2048)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--chunk", type=int, default=4096)
ap.add_argument("--kernels", default="auto")
a = ap.parse_args()
faulthandler.dump_traceback_later(30, repeat=True)
c = B.v4_config(B.FLASH, a.layers)
tmp = tempfile.mkdtemp()
Path(tmp, "config.json").write_text(json.dumps(c))
n = a.context + 64
llm = LLM(tmp, device="cuda", dtype="bfloat16", load_format="dummy", max_model_len=n, kernels=a.kernels,
          max_num_seqs=1, max_num_batched_tokens=min(a.chunk, a.context), block_size=16,
          num_kv_blocks=-(-n // 16), enable_prefix_caching=False)
B.random_hash_tables_(llm.model)
torch.cuda.synchronize()
print(f"built; {torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated", flush=True)
e = llm.engine
e.add_request("a", torch.randint(3, 129280, (a.context,)).tolist(),
              SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
i = 0
while e.has_unfinished_requests():
    t = time.perf_counter()
    outs = e.step()
    torch.cuda.synchronize()
    print(f"step {i}: {(time.perf_counter() - t) * 1e3:.1f} ms, stats {e.stats()}, "
          f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
    i += 1
faulthandler.cancel_dump_traceback_later()
