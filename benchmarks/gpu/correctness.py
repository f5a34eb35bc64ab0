"""GPU correctness of the whole engine (CUDA graphs, fused kernels, Triton decode, fused prefill) against HF
transformers on a random Qwen2.5-0.5B-shaped model:

- fp32: greedy continuations token-identical to HF fp32 (eager attention), prompts served together;
- bf16: how many of 32 prompts keep their first 16 greedy tokens identical to HF bf16 (SDPA).

    python benchmarks/gpu/correctness.py [--out DIR]       (H200, ~1 min)
"""
import argparse
import random

import torch

from common import config_dir, env, free_cuda, hf_twin, save


def hf_greedy(hf, prompt: list[int], n: int) -> list[int]:
    x = torch.tensor([prompt], device="cuda")
    with torch.no_grad():
        out = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                          pad_token_id=0)
    return out[0, len(prompt):].tolist()


def main() -> None:
    from mini_infer import LLM, SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shape", default="Qwen2.5-0.5B")
    a = ap.parse_args()
    rng = random.Random(0)
    res = {"env": env(), "shape": a.shape}
    path = config_dir(a.shape)
    for dtype, num, n, attn in ((torch.float32, 8, 32, "eager"), (torch.bfloat16, 32, 16, "sdpa")):
        prompts = [[rng.randint(0, 150000) for _ in range(rng.randint(8, 300))] for _ in range(num)]
        llm = LLM(path, dtype=str(dtype).split(".")[1], device="cuda", load_format="dummy", max_model_len=2048,
                  max_num_seqs=64, num_kv_blocks=4096)
        ours = [o.outputs[0].token_ids for o in llm.generate(prompts, SamplingParams(temperature=0, max_tokens=n,
                                                                                    ignore_eos=True))]
        hf = hf_twin(llm, a.shape, dtype, attn)
        ref = [hf_greedy(hf, p, n) for p in prompts]
        if dtype == torch.bfloat16:                                 # how sensitive is the model itself?
            hf_e = hf_twin(llm, a.shape, dtype, "eager")
            ref_e = [hf_greedy(hf_e, p, n) for p in prompts]
            res["bf16_hf_eager_vs_hf_sdpa_identical"] = sum(x == y for x, y in zip(ref_e, ref))
            res["bf16_ours_vs_hf_eager_identical"] = sum(x == y for x, y in zip(ours, ref_e))
            print(f"bf16: HF eager vs HF sdpa: {res['bf16_hf_eager_vs_hf_sdpa_identical']}/{num} identical; ours vs "
                  f"HF eager: {res['bf16_ours_vs_hf_eager_identical']}/{num}", flush=True)
            free_cuda(hf_e)
            del hf_e
        same = sum(o == r for o, r in zip(ours, ref))
        first_diff = [next((i for i, (x, y) in enumerate(zip(o, r)) if x != y), None) for o, r in zip(ours, ref)]
        key = "fp32" if dtype == torch.float32 else "bf16"
        res[key] = {"prompts": num, "tokens": n, "identical": same, "hf_attention": attn,
                    "first_differing_token": first_diff,
                    "graphs": bool(getattr(llm.engine.runner, "graphs", None))}
        print(f"{key}: {same}/{num} prompts with all {n} greedy tokens identical to HF ({attn}); first differing "
              f"token per prompt: {first_diff}", flush=True)
        del llm
        free_cuda(hf)
    save("correctness", res, a.out)


if __name__ == "__main__":
    main()
