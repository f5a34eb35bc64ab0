"""Batch-1 decode of Qwen2.5-0.5B (bf16, CUDA graphs) under cProfile and torch.profiler, for the tree in $SRC."""
import cProfile, pstats, io, sys, time, os
sys.path.insert(0, os.path.join(os.environ["SRC"], "benchmarks", "gpu"))
import torch
from common import config_dir
from mini_infer import LLM, SamplingParams
llm = LLM(config_dir("Qwen2.5-0.5B"), dtype="bfloat16", device="cuda", load_format="dummy",
          max_model_len=2048, max_num_seqs=8, num_kv_blocks=1024)
prompt = list(range(1000, 1016))
g = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
g(300); torch.cuda.synchronize()
for n in (257, 513):
    t = time.perf_counter(); g(n); torch.cuda.synchronize(); print(n, time.perf_counter() - t)
pr = cProfile.Profile(); pr.enable(); g(257); pr.disable()
st = pstats.Stats(pr); print("calls per step", st.total_calls / 256)
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30); print(s.getvalue()[-7000:])
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    g(33); torch.cuda.synchronize()
ev = [e for e in p.key_averages() if e.key.startswith("cuda") or e.key.startswith("aten::")]
for e in sorted(ev, key=lambda e: -e.count)[:25]: print(f"{e.count/32:8.2f} {e.cpu_time_total/32:9.1f}us {e.key}")
