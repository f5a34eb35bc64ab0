"""Chapter 60 on GPUs over NCCL: `tensor_parallel_size=N` (N=1: a one-GPU NCCL world through the distributed code
path) against the plain one-process engine holding the same synthetic weights: greedy tokens on 8 prompts and
batch-1 decode ms/step.   python benchmarks/gpu/tensor_parallel.py --tp 1 --shape Qwen2.5-0.5B --out $OUT"""
import argparse
import sys
import time

import torch

sys.path.insert(0, "benchmarks/gpu")
from common import config_dir, env, save, table
from mini_infer import LLM, SamplingParams


def greedy(llm, prompts, n=32):
    params = SamplingParams(temperature=0.0, max_tokens=n, min_tokens=n)
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params)]


def decode_ms(llm, n=64):
    params = SamplingParams(temperature=0.0, max_tokens=n, min_tokens=n)
    llm.generate([[11, 12, 13]], SamplingParams(temperature=0.0, max_tokens=4))     # warm up
    torch.cuda.synchronize()
    t = time.perf_counter()
    llm.generate([[11, 12, 13]], params)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e3


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--tp", type=int, default=1)
    a.add_argument("--shape", default="Qwen2.5-0.5B")
    a.add_argument("--dtype", default="float32")
    a.add_argument("--out", default=None)
    a = a.parse_args()
    ckpt = config_dir(a.shape)
    opts = dict(device="cuda", dtype=a.dtype, load_format="dummy", enforce_eager=True, num_kv_blocks=2048)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 20000, (int(n),), generator=g).tolist() for n in torch.randint(8, 200, (8,), generator=g)]
    tp = LLM(ckpt, tensor_parallel_size=a.tp, distributed_executor_backend="mp", **opts)
    tp_tokens, tp_ms = greedy(tp, prompts), decode_ms(tp)
    weights = {k: v.cpu() for k, v in tp.engine.model.module.state_dict().items()} if a.tp == 1 else None
    tp.shutdown()
    del tp
    torch.cuda.empty_cache()
    one = LLM(ckpt, **opts)
    if weights is not None:                      # the very same tensors (world 1 holds the whole model)
        one.engine.model.load_state_dict(weights)
    else:                                        # the same per-name seeded weights through a one-rank world
        one.shutdown()
        one = LLM(ckpt, tensor_parallel_size=1, distributed_executor_backend="mp", **opts)
    one_tokens, one_ms = greedy(one, prompts), decode_ms(one)
    same = sum(x == y for x, y in zip(tp_tokens, one_tokens))
    res = {"env": env(), "shape": a.shape, "dtype": a.dtype, "tp": a.tp, "backend": "nccl",
           "greedy_identical": f"{same}/{len(prompts)}", "decode_ms_tp": tp_ms, "decode_ms_one": one_ms}
    print(table(["shape", "tp", "greedy identical", "decode ms/step tp", "decode ms/step one process"],
                [[a.shape, a.tp, res["greedy_identical"], f"{tp_ms:.2f}", f"{one_ms:.2f}"]]))
    save(f"tensor_parallel_tp{a.tp}", res, a.out)


if __name__ == "__main__":
    main()
