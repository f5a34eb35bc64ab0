"""Is `kernels="torch"` bit-identical to transformers in bf16 on the GPU?

For one model (by default a random Qwen2.5-0.5B shape; `--gguf PATH` a real checkpoint) and bf16 on CUDA:
- the RoPE tables: ours (`cos_sin_cache`, built at construction) against what HF's rotary module returns;
- one prompt's forward, module by module: the first module whose output differs from HF's (same name, same call);
- prompt logits of `--logits` prompts, bit for bit (`LLM.logits` against HF's forward);
- greedy: how many of `--num` prompts keep their first 16 tokens identical to HF `generate` (SDPA, one prompt at a
  time), served one at a time and served together.

    python benchmarks/gpu/hf_exact.py [--gguf PATH] [--num 32] [--out DIR]     (H200, ~1 min)
"""
import argparse
import random
from pathlib import Path

import torch

from common import env, hf_twin, save
from correctness import SENTENCES, hf_gguf, hf_greedy, make_llm, random_prompts


def module_outputs(model, run) -> list[tuple[str, torch.Tensor]]:
    "(name, first tensor output) of every leaf module of `model`, in call order, during `run()`."
    seen, hooks = [], []
    for name, m in model.named_modules():
        if name and not list(m.children()):
            def hook(mod, args, out, name=name):
                t = out[0] if isinstance(out, tuple) else out
                if isinstance(t, torch.Tensor):
                    seen.append((name, t.detach().clone()))
            hooks.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            run()
    finally:
        for h in hooks:
            h.remove()
    return seen


def first_difference(ours, theirs) -> dict:
    "The first of our module outputs that differs from HF's output of the same module name and size."
    ref = {}
    for name, t in theirs:
        ref.setdefault(name, t)
    compared = 0
    for name, t in ours:
        r = ref.get(name)
        if r is None or r.numel() != t.numel():
            continue
        compared += 1
        a, b = t.reshape(-1), r.reshape(-1)
        if not torch.equal(a, b):
            return {"module": name, "compared_before": compared - 1,
                    "max_diff": (a.float() - b.float()).abs().max().item(), "differing": int((a != b).sum())}
    return {"module": None, "compared": compared}


def main() -> None:
    from mini_infer import SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shape", default="Qwen2.5-0.5B")
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--num", type=int, default=32)
    ap.add_argument("--logits", type=int, default=8)
    a = ap.parse_args()
    rng = random.Random(0)
    opts = dict(dtype="bfloat16", device="cuda", max_model_len=2048, max_num_seqs=64, num_kv_blocks=4096,
                kernels="torch")
    if a.gguf:
        llm = make_llm(a.gguf, a.shape, **opts)
        prompts = [llm.tokenizer.encode(s) for s in (SENTENCES * 2)[:a.num]]
        hf = hf_gguf(Path(a.gguf), torch.bfloat16, "cuda", "sdpa")
    else:
        llm = make_llm(None, a.shape, **opts)
        prompts = random_prompts(rng, a.num)
        hf = hf_twin(llm, a.shape, torch.bfloat16, "sdpa")
    res = {"env": env(), "model": a.gguf and Path(a.gguf).name or f"random {a.shape}", "kernels": "torch"}

    rope = next(m for m in llm.model.modules() if hasattr(m, "cos_sin_cache"))
    n = 2048
    x = torch.zeros(1, n, 1, dtype=torch.bfloat16, device="cuda")
    cos, sin = hf.model.rotary_emb(x, torch.arange(n, device="cuda")[None])
    c, s = rope.cos_sin_cache[:n].chunk(2, dim=-1)
    res["rope_cos_equal"] = torch.equal(torch.cat((c, c), -1).to(cos.dtype), cos[0])
    res["rope_sin_equal"] = torch.equal(torch.cat((s, s), -1).to(sin.dtype), sin[0])
    res["rope_cache_dtype"] = str(rope.cos_sin_cache.dtype)

    p = prompts[0]
    ours = module_outputs(llm.model, lambda: llm.logits(p))
    theirs = module_outputs(hf, lambda: hf(torch.tensor([p], device="cuda")))
    res["first_differing_module"] = first_difference(ours, theirs)

    same_logits = []
    for p in prompts[:a.logits]:
        with torch.no_grad():
            ref = hf(torch.tensor([p], device="cuda")).logits[0].float().cpu()
        same_logits.append(torch.equal(llm.logits(p), ref))
    res["prompt_logits_bit_identical"] = sum(same_logits)
    res["prompt_logits_checked"] = len(same_logits)

    rule = SamplingParams(temperature=0, max_tokens=16, min_tokens=16, ignore_eos=True)
    ref = [hf_greedy(hf, p, 16) for p in prompts]
    alone = [llm.generate([p], rule)[0].outputs[0].token_ids for p in prompts]
    together = [o.outputs[0].token_ids for o in llm.generate(prompts, rule)]
    res["greedy_alone_identical"] = sum(x == y for x, y in zip(alone, ref))
    res["greedy_together_identical"] = sum(x == y for x, y in zip(together, ref))
    res["prompts"] = len(prompts)
    res["alone_misses"] = []                        # where a prompt served alone left HF, and HF's top-2 margin there
    for p, o, r in zip(prompts, alone, ref):
        if o != r:
            i = next(j for j, (x, y) in enumerate(zip(o, r)) if x != y)
            x = torch.tensor([p + r[:i]], device="cuda")
            with torch.no_grad():
                top = hf(x).logits[0, -1].float().topk(2).values.tolist()
            res["alone_misses"].append({"prompt_len": len(p), "first_differing_token": i, "hf_top2": top,
                                        "ours": o[i], "hf": r[i]})
    for k, v in res.items():
        if k != "env":
            print(f"{k}: {v}", flush=True)
    save("hf_exact" + ("_gguf" if a.gguf else ""), res, a.out)


if __name__ == "__main__":
    main()
