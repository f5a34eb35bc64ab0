"""Is `batch_invariant=True` batch-invariant on the GPU? kernels="torch", random Qwen2.5-0.5B shape, bf16, the 32
prompts of correctness.py: each served alone twice, all served together twice (tokens and logprobs compared), and
both against HF greedy (SDPA, one prompt at a time).

    python benchmarks/gpu/batch_invariance.py [--out DIR]      (H200, ~1 min)
"""
import os, sys, time

import torch
sys.path.insert(0, "benchmarks/gpu")
from common import config_dir, hf_twin
from correctness import bf16_random_prompts, hf_greedy
from mini_infer import LLM, SamplingParams
dev = "cuda" if torch.cuda.is_available() else "cpu"
shape = "Qwen2.5-0.5B"
prompts = bf16_random_prompts(32)
if dev == "cpu":
    prompts = [[t % 384 for t in p[:40]] for p in prompts[:6]]
opts = dict(dtype="bfloat16", device=dev, max_model_len=2048 if dev == "cuda" else 512, max_num_seqs=64, num_kv_blocks=4096, kernels="torch", load_format="dummy")
rule = SamplingParams(temperature=0, max_tokens=16, min_tokens=16, ignore_eos=True, logprobs=0)
inv = LLM(config_dir(shape) if dev == "cuda" else sys.argv[1], **opts, batch_invariant=True)
t0 = time.time()
alone = [inv.generate([p], rule)[0].outputs[0] for p in prompts]
tog1 = [o.outputs[0] for o in inv.generate(prompts, rule)]
tog2 = [o.outputs[0] for o in inv.generate(prompts, rule)]
alone2 = [inv.generate([p], rule)[0].outputs[0] for p in prompts]
print("time", time.time() - t0)
def cmp(a, b):
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x.token_ids != y.token_ids:
            j = next(k for k, (u, v) in enumerate(zip(x.token_ids, y.token_ids)) if u != v)
            out.append((i, len(prompts[i]), j, x.logprobs[j].logprob, y.logprobs[j].logprob))
        elif [l.logprob for l in x.logprobs] != [l.logprob for l in y.logprobs]:
            out.append((i, "same tokens, logprobs differ"))
    return out
res = {"together_vs_alone": cmp(tog1, alone), "together_vs_together": cmp(tog1, tog2), "alone_vs_alone": cmp(alone, alone2)}
for k, v in res.items():
    print(k, v, flush=True)
if dev == "cuda":
    hf = hf_twin(inv, shape, torch.bfloat16, "sdpa")
    ref = [hf_greedy(hf, p, 16) for p in prompts]
    res["alone_vs_hf_identical"] = sum(a.token_ids == r for a, r in zip(alone, ref))
    res["together_vs_hf_identical"] = sum(a.token_ids == r for a, r in zip(tog1, ref))
    print(res, flush=True)
    from common import env, save
    save("batch_invariance", {"env": env(), **res}, os.environ.get("OUT"))
