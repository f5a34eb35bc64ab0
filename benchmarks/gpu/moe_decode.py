"""MoE decode on the GPU: the expert loop (one host sync per layer, eager) against the grouped GEMM path eager and
captured in CUDA graphs, and transformers `generate` (its default `grouped_mm` experts) in the same run.

    python benchmarks/gpu/moe_decode.py [--shapes Mixtral-8x7B-4L Qwen3-30B-A3B-8L] [--batch 1 16] [--steps 33]

Synthetic bf16 weights (load_format="dummy"; HF gets its own random weights: speed does not depend on values), the
real models' layer shapes with fewer layers so that one H100 holds them. Also checks, per shape, one MoE block's
grouped GEMM output against the loop's (bf16: the kernels accumulate in another order, so a tolerance, printed) and
that the captured decode gives the same greedy tokens as the eager loop. Writes <gpu>_moe_decode_<date>.json.
"""
import argparse
import json
import tempfile
from pathlib import Path

import torch

from common import env, free_cuda, ms_per_step, save, table

MIXTRAL_4L = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", vocab_size=32000, hidden_size=4096,
                  intermediate_size=14336, num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8,
                  max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-5, num_local_experts=8,
                  num_experts_per_tok=2, hidden_act="silu", tie_word_embeddings=False, bos_token_id=1,
                  eos_token_id=2, torch_dtype="bfloat16")
QWEN3_MOE_8L = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", vocab_size=151936,
                    hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=8,
                    num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
                    num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
                    max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6, hidden_act="silu",
                    tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16")
SHAPES = {"Mixtral-8x7B-4L": MIXTRAL_4L, "Qwen3-30B-A3B-8L": QWEN3_MOE_8L}


def config_dir(shape: str) -> str:
    d = tempfile.mkdtemp(prefix=shape + "-")
    Path(d, "config.json").write_text(json.dumps(SHAPES[shape]))
    return d


def experts_of(model) -> list:
    from mini_infer.layers.moe import Experts
    return [m for m in model.modules() if isinstance(m, Experts)]


@torch.no_grad()
def block_check(model, device: str) -> dict:
    "One MoE block on 64 random tokens: grouped GEMM against the loop (bf16), max |diff| and the output's max |y|."
    from mini_infer.layers.moe import SparseMoeBlock
    blk = next(m for m in model.modules() if isinstance(m, SparseMoeBlock))
    x = torch.randn(64, blk.gate.weight.shape[1], device=device, dtype=torch.bfloat16)
    blk.experts.grouped = False
    loop = blk(x).float()
    blk.experts.grouped = None
    grouped = blk(x).float()
    return {"block_max_diff": (grouped - loop).abs().max().item(), "block_max_abs": loop.abs().max().item()}


def main() -> None:
    from mini_infer import LLM, SamplingParams
    from transformers import AutoConfig, AutoModelForCausalLM
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES))
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 16])
    ap.add_argument("--steps", type=int, default=33)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res = {"env": env(), "steps": a.steps, "rows": []}
    greedy = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    for shape in a.shapes:
        path = config_dir(shape)
        kw = dict(dtype="bfloat16", device=a.device, load_format="dummy", max_model_len=1024,
                  max_num_seqs=max(a.batch), num_kv_blocks=512)
        eager = LLM(path, enforce_eager=True, **kw)
        check = block_check(eager.model, a.device)
        V = SHAPES[shape]["vocab_size"]
        prompts = {b: [[(1000 + 17 * i + j) % V for j in range(16)] for i in range(b)] for b in a.batch}
        ms = {}
        for b in a.batch:
            gen = lambda n: eager.generate(prompts[b], greedy(n))
            for e in experts_of(eager.model):
                e.grouped = False
            ms[("loop", b)] = ms_per_step(gen, a.steps, repeats=3)
            loop_tokens = [o.outputs[0].token_ids for o in eager.generate(prompts[b], greedy(32))]
            for e in experts_of(eager.model):
                e.grouped = None
            ms[("grouped", b)] = ms_per_step(gen, a.steps, repeats=3)
            ms[("tokens", b)] = loop_tokens
        del eager
        free_cuda()
        try:                                    # capture fails loudly if a layer still syncs with the host
            graphed = LLM(path, **kw)
            capture_error = None
        except RuntimeError as e:
            graphed, capture_error = None, str(e).splitlines()[0]
            print("capture failed:", capture_error, flush=True)
        num_graphs = len(getattr(graphed.engine.runner, "graphs", {}) or {}) if graphed else 0
        for b in a.batch:
            if graphed is None:
                ms[("graphs", b)], ms[("same", b)] = float("nan"), 0
                continue
            ms[("graphs", b)] = ms_per_step(lambda n: graphed.generate(prompts[b], greedy(n)), a.steps, repeats=3)
            got = [o.outputs[0].token_ids for o in graphed.generate(prompts[b], greedy(32))]
            ms[("same", b)] = sum(x == y for x, y in zip(got, ms[("tokens", b)]))
        del graphed
        free_cuda()
        d = dict(SHAPES[shape])
        cfg = AutoConfig.for_model(d.pop("model_type"), **{k: v for k, v in d.items() if k != "torch_dtype"})
        with torch.device(a.device):
            hf = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
        for b in a.batch:
            x = torch.tensor(prompts[b], device=a.device)
            def hf_gen(n):
                with torch.no_grad():
                    hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                                min_new_tokens=n, pad_token_id=0)
            hf_ms = ms_per_step(hf_gen, a.steps, repeats=3)
            row = {"shape": shape, "batch": b, "loop_eager_ms": ms[("loop", b)], "grouped_eager_ms": ms[("grouped", b)],
                   "grouped_graphs_ms": ms[("graphs", b)], "num_graphs": num_graphs, "hf_ms": hf_ms,
                   "hf_experts_implementation": getattr(hf.config, "_experts_implementation", None),
                   "graphs_vs_loop": ms[("loop", b)] / ms[("graphs", b)], "hf_over_ours": hf_ms / ms[("graphs", b)],
                   "greedy_identical_to_loop": f"{ms[('same', b)]}/{b}", "capture_error": capture_error, **check}
            res["rows"].append(row)
            print(row, flush=True)
        del hf
        free_cuda()
    save("moe_decode", res, a.out)
    print(f"\n{res['env']}")
    print(table(["shape", "batch", "loop eager ms", "grouped eager ms", "grouped graphs ms", "graphs", "HF ms",
                 "loop / graphs", "HF / ours", "greedy = loop", "block |diff| / max"],
                [[r["shape"], r["batch"], r["loop_eager_ms"], r["grouped_eager_ms"], r["grouped_graphs_ms"],
                  r["num_graphs"], r["hf_ms"], r["graphs_vs_loop"], r["hf_over_ours"], r["greedy_identical_to_loop"],
                  f"{r['block_max_diff']:.1e} / {r['block_max_abs']:.1e}"] for r in res["rows"]]))


if __name__ == "__main__":
    main()
