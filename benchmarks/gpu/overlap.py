"""Overlap scheduling on one GPU: batch-1 decode and the nano-vllm workload with async_scheduling off and on.

For each setting: wall time, output tokens/s, and a torch profiler pass whose GPU busy fraction is the sum of
kernel times over the wall time of the profiled window (1.0: the GPU never waits for the host). Outputs must be
token-identical between the two settings (greedy).

Run (repo root on PYTHONPATH): python benchmarks/gpu/overlap.py [--num-requests 256] [--out DIR]
"""
import argparse
import time

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from common import config_dir, env, free_cuda, save, table
from throughput import workload


def busy_fraction(fn) -> dict:
    "Run fn under the CUDA profiler: kernel seconds, wall seconds, their ratio, kernel launches."
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]   # kernels and copies
    busy = sum(e.time_range.elapsed_us() for e in kernels) / 1e6                    # us -> s
    return {"wall_s": wall, "kernel_s": busy, "busy_fraction": busy / wall, "kernels": len(kernels)}


def one_setting(on: bool, prompts, outs, decode_tokens: int) -> dict:
    from mini_infer import LLM, SamplingParams
    llm = LLM(config_dir("Qwen3-0.6B"), dtype="bfloat16", device="cuda", load_format="dummy",
              max_model_len=2048, max_num_seqs=256, max_num_batched_tokens=16384,
              gpu_memory_utilization=0.5, async_scheduling=on)
    assert type(llm.engine).__name__ == ("OverlapEngine" if on else "LLMEngine")
    assert type(llm.engine.runner).__name__ == "CUDAGraphModelRunner", "decode must replay graphs"
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    llm.generate([[1, 2, 3]], greedy(4))                                                 # warm-up
    run = {"async_scheduling": on}
    b1 = lambda: llm.generate([list(range(10, 522))], greedy(decode_tokens))
    torch.cuda.synchronize(); t0 = time.perf_counter()
    got1 = b1()
    torch.cuda.synchronize()
    run["batch1_ms_per_token"] = 1000 * (time.perf_counter() - t0) / decode_tokens
    run["batch1_profile"] = busy_fraction(b1)
    params = [greedy(o) for o in outs]
    torch.cuda.synchronize(); t0 = time.perf_counter()
    got = llm.generate(prompts, params)
    torch.cuda.synchronize()
    run["workload_s"] = time.perf_counter() - t0
    run["workload_tok_s"] = sum(outs) / run["workload_s"]
    run["steps"] = llm.engine.counters["steps"]
    run["workload_profile"] = busy_fraction(lambda: llm.generate(prompts[:64], params[:64]))
    tokens = [got1[0].outputs[0].token_ids] + [o.outputs[0].token_ids for o in got]
    del llm
    free_cuda()
    return run, tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-requests", type=int, default=256)
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    prompts, outs = workload(a.num_requests)
    res = {"env": env(), "shape": "Qwen3-0.6B", "dtype": "bfloat16", "num_requests": a.num_requests,
           "output_tokens": sum(outs), "runs": []}
    tokens = []
    for on in (False, True):
        run, toks = one_setting(on, prompts, outs, a.decode_tokens)
        res["runs"].append(run)
        tokens.append(toks)
        print(run, flush=True)
    res["identical_outputs"] = tokens[0] == tokens[1]
    off, on = res["runs"]
    res["batch1_speedup"] = off["batch1_ms_per_token"] / on["batch1_ms_per_token"]
    res["workload_speedup"] = on["workload_tok_s"] / off["workload_tok_s"]
    save("overlap", res, a.out)
    print(table(["async_scheduling", "b1 ms/token", "b1 GPU busy", "workload tok/s", "workload GPU busy"],
                [[str(r["async_scheduling"]), r["batch1_ms_per_token"], r["batch1_profile"]["busy_fraction"],
                  r["workload_tok_s"], r["workload_profile"]["busy_fraction"]] for r in res["runs"]]))
    print(f"on/off: batch 1 {res['batch1_speedup']:.2f}x, workload {res['workload_speedup']:.2f}x; "
          f"outputs identical: {res['identical_outputs']}")


if __name__ == "__main__":
    main()
