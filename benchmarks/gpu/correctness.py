"""GPU correctness of the whole engine (CUDA graphs, fused kernels, Triton decode, fused prefill) against HF
transformers:

- fp32: greedy continuations token-identical to HF fp32 (eager attention), prompts served together;
- bf16: how many of 32 prompts keep their first 16 greedy tokens identical to HF bf16 (SDPA, one prompt at a
  time), and, as the model's own sensitivity, how often HF agrees with itself: eager against SDPA attention, and
  all prompts in one left-padded batch against one at a time;
- bf16 with `kernels="torch"` (transformers' PyTorch calls, chapter 25): the same count, prompts served one at a
  time (as HF runs them), served together, and served together with `batch_invariant=True`.

By default on a random Qwen2.5-0.5B-shaped model (synthetic weights, both sides the same tensors). `--gguf PATH`
uses a real checkpoint instead (e.g. the bundled SmolLM2 GGUF; transformers loads the same file), with English
prompts: trained weights give peaked next-token distributions, so bf16 rounding rarely flips an argmax.

    python benchmarks/gpu/correctness.py [--gguf PATH] [--device cuda] [--num 32] [--alone] [--out DIR]   (H200, ~1 min)
"""
import argparse
import random
from pathlib import Path

import torch

from common import config_dir, env, free_cuda, hf_twin, save

SENTENCES = ["The capital of France is", "Water boils at a temperature of", "The largest planet in the solar system",
             "To make a cup of tea, first", "The history of the Roman Empire", "A good way to learn programming is",
             "The theory of relativity says that", "In the morning, the birds", "The main ingredients of bread are",
             "Photosynthesis is the process by which", "The best way to stay healthy is", "Once upon a time, there was",
             "The stock market is", "My favourite book is", "The mountains in winter are", "Electric cars work by",
             "The ocean covers most of", "A computer program is", "The first person to walk on the moon",
             "Music can make people", "The city of Tokyo is known for", "Learning a new language helps",
             "The recipe calls for two cups of", "Volcanoes erupt when", "The human heart pumps",
             "In mathematics, a prime number is", "The weather today is", "Cats and dogs are",
             "The internet was invented", "A healthy breakfast includes", "The speed of light is",
             "Shakespeare wrote plays such as"]


def random_prompts(rng: random.Random, num: int) -> list[list[int]]:
    "`num` prompts of 8 to 300 random token ids: the random model's workload."
    return [[rng.randint(0, 150000) for _ in range(rng.randint(8, 300))] for _ in range(num)]


def bf16_random_prompts(num: int = 32) -> list[list[int]]:
    "The prompts of this script's bf16 pass on the random model (drawn after the fp32 pass's quarter as many)."
    rng = random.Random(0)
    random_prompts(rng, max(1, num // 4))
    return random_prompts(rng, num)


def make_llm(gguf: str | None, shape: str, **options):
    "mini_infer on the real checkpoint `gguf`, else on random weights of `shape`."
    from mini_infer import LLM
    return LLM(gguf, **options) if gguf else LLM(config_dir(shape), load_format="dummy", **options)


def hf_greedy(hf, prompt: list[int], n: int) -> list[int]:
    x = torch.tensor([prompt], device=hf.device)
    with torch.no_grad():
        out = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                          pad_token_id=0)
    return out[0, len(prompt):].tolist()


def hf_greedy_batched(hf, prompts: list[list[int]], n: int) -> list[list[int]]:
    "HF greedy over all prompts in one left-padded batch (how `generate` serves a batch)."
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device=hf.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=hf.device)
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n, min_new_tokens=n, pad_token_id=0)
    return out[:, width:].tolist()


def hf_gguf(path: Path, dtype: torch.dtype, device: str, attn: str):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype,
                                                attn_implementation=attn).to(device).eval()


def main() -> None:
    from mini_infer import SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shape", default="Qwen2.5-0.5B")
    ap.add_argument("--gguf", default=None, help="a real checkpoint (.gguf) instead of the random shape")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--num", type=int, default=32, help="bf16 prompts (fp32 uses a quarter)")
    ap.add_argument("--alone", action="store_true", help="also serve each prompt alone (batch 1, as HF runs them)")
    a = ap.parse_args()
    rng = random.Random(0)
    res = {"env": env(), "model": a.gguf and Path(a.gguf).name or f"random {a.shape}", "device": a.device}
    for dtype, num, n, attn in ((torch.float32, max(1, a.num // 4), 32, "eager"), (torch.bfloat16, a.num, 16, "sdpa")):
        name = str(dtype).split(".")[1]
        opts = dict(dtype=name, device=a.device, max_model_len=2048, max_num_seqs=64, num_kv_blocks=4096)
        if a.gguf:
            llm = make_llm(a.gguf, a.shape, **opts)
            prompts = [llm.tokenizer.encode(s) for s in (SENTENCES * 2)[:num]]
            make_hf = lambda at: hf_gguf(Path(a.gguf), dtype, a.device, at)
        else:
            llm = make_llm(None, a.shape, **opts)
            prompts = random_prompts(rng, num)
            make_hf = lambda at: hf_twin(llm, a.shape, dtype, at)
        same_rule = SamplingParams(temperature=0, max_tokens=n, min_tokens=n, ignore_eos=True)   # HF's min_new_tokens
        ours = [o.outputs[0].token_ids for o in llm.generate(prompts, same_rule)]                # bans EOS until n
        graphs = bool(getattr(llm.engine.runner, "graphs", None))
        alone = [llm.generate([p], same_rule)[0].outputs[0].token_ids for p in prompts] if a.alone else None
        hf = make_hf(attn)
        ref = [hf_greedy(hf, p, n) for p in prompts]
        key = "fp32" if dtype == torch.float32 else "bf16"
        if dtype == torch.bfloat16:                                 # how sensitive is the model itself?
            hf_e = make_hf("eager")
            ref_e = [hf_greedy(hf_e, p, n) for p in prompts]
            res["bf16_hf_eager_vs_hf_sdpa_identical"] = sum(x == y for x, y in zip(ref_e, ref))
            res["bf16_ours_vs_hf_eager_identical"] = sum(x == y for x, y in zip(ours, ref_e))
            print(f"bf16: HF eager vs HF sdpa: {res['bf16_hf_eager_vs_hf_sdpa_identical']}/{num} identical; ours vs "
                  f"HF eager: {res['bf16_ours_vs_hf_eager_identical']}/{num}", flush=True)
            del hf_e
            ref_b = hf_greedy_batched(hf, prompts, n)              # HF's own batch against one prompt at a time
            res["bf16_hf_batched_vs_hf_alone_identical"] = sum(x == y for x, y in zip(ref_b, ref))
            print(f"bf16: HF sdpa, one left-padded batch vs one prompt at a time: "
                  f"{res['bf16_hf_batched_vs_hf_alone_identical']}/{num} identical", flush=True)
            del llm                                                 # now with transformers' own kernels (chapter 25)
            free_cuda()
            llm = make_llm(a.gguf, a.shape, **opts, kernels="torch")
            head = llm.model.lm_head.weight
            assert torch.equal(head, hf.lm_head.weight.to(head.device)), "not the same weights as HF's"
            t_alone = [llm.generate([p], same_rule)[0].outputs[0].token_ids for p in prompts]
            t_together = [o.outputs[0].token_ids for o in llm.generate(prompts, same_rule)]
            del llm
            free_cuda()
            llm = make_llm(a.gguf, a.shape, **opts, kernels="torch", batch_invariant=True)
            t_invariant = [o.outputs[0].token_ids for o in llm.generate(prompts, same_rule)]
            res["bf16_torch_kernels"] = {"identical_served_alone": sum(x == y for x, y in zip(t_alone, ref)),
                                         "identical_served_together": sum(x == y for x, y in zip(t_together, ref)),
                                         "identical_together_batch_invariant":
                                             sum(x == y for x, y in zip(t_invariant, ref)),
                                         "prompts": num, "tokens": n}
            t = res["bf16_torch_kernels"]
            print(f"bf16, kernels='torch': {t['identical_served_alone']}/{num} identical to HF served one at a time, "
                  f"{t['identical_served_together']}/{num} served together, "
                  f"{t['identical_together_batch_invariant']}/{num} served together with batch_invariant", flush=True)
        same = sum(o == r for o, r in zip(ours, ref))
        first_diff = [next((i for i, (x, y) in enumerate(zip(o, r)) if x != y), None) for o, r in zip(ours, ref)]
        res[key] = {"prompts": num, "tokens": n, "identical": same, "hf_attention": attn,
                    "first_differing_token": first_diff,
                    "graphs": graphs}
        if alone is not None:                                       # the same prompts served one at a time
            res[key]["identical_served_alone"] = sum(o == r for o, r in zip(alone, ref))
            res[key]["alone_equals_together"] = sum(x == y for x, y in zip(alone, ours))
            print(f"{key}, prompts served one at a time: {res[key]['identical_served_alone']}/{num} identical to HF "
                  f"({attn}); {res[key]['alone_equals_together']}/{num} equal to the batched run", flush=True)
        print(f"{key}: {same}/{num} prompts with all {n} greedy tokens identical to HF ({attn}); first differing "
              f"token per prompt: {first_diff}", flush=True)
        del llm, hf
        if a.device == "cuda":
            free_cuda()
    save("correctness" + ("_gguf" if a.gguf else ""), res, a.out)


if __name__ == "__main__":
    main()
