"""CPU decode step of a small DeepSeek-V3.2-shaped DSA model vs the same weights with the indexer off (DeepSeek-V3,
dense MLA) at a context of 4x index_topk (issue 16). fp32, random weights, batch 1, one sequence's decode step through
the model's forward with its paged cache; median of 30 steps. Appends a run to benchmarks/results/cpu-2core_dsa.json.

    OMP_NUM_THREADS=2 python benchmarks/cpu_dsa_decode.py [--topk 256]
"""
import argparse, json, os, statistics, sys, time

import torch
from mini_infer.config import ModelConfig
from mini_infer.layers.attention import bind_kv_cache, build_metadata
from mini_infer.models.deepseek import DeepseekV3ForCausalLM
from mini_infer.models.dsa import DeepseekV32ForCausalLM
from mini_infer.oracle import randomize_
from mini_infer.testing import env_report

p = argparse.ArgumentParser()
p.add_argument("--topk", type=int, default=256)
args = p.parse_args()
K = args.topk
L = 4 * K
cfg = dict(architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32", vocab_size=1024, hidden_size=512,
           intermediate_size=1024, num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=16,
           max_position_embeddings=8192, q_lora_rank=256, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
           v_head_dim=64, index_topk=K, index_head_dim=64, index_n_heads=16, rope_theta=10000.0, tie_word_embeddings=False)
torch.manual_seed(0)
dsa = randomize_(DeepseekV32ForCausalLM(ModelConfig.from_dict(cfg))).eval()
dense = DeepseekV3ForCausalLM(ModelConfig.from_dict({**cfg, "architectures": ["DeepseekV3ForCausalLM"],
                                                     "model_type": "deepseek_v3"})).eval()
dense.load_state_dict({k: v for k, v in dsa.state_dict().items() if ".indexer." not in k})


@torch.no_grad()
def step_ms(model):
    bind_kv_cache(model, L // 16 + 1, 16, torch.float32)
    table = [list(range(L // 16 + 1))]
    model(torch.randint(0, 1024, (L,)), torch.arange(L), build_metadata([L], [L], table, 16))   # fill the cache
    ts = []
    for _ in range(30):
        md = build_metadata([1], [L + 1], table, 16)
        t = time.perf_counter()
        model.compute_logits(model(torch.tensor([5]), torch.tensor([L]), md))
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


d, s = step_ms(dense), step_ms(dsa)
run = dict(bench="cpu_dsa_decode", time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), env=env_report(),
           context=L, index_topk=K, dense_mla_ms=d, dsa_ms=s, dsa_over_dense=s / d)
print(f"context {L} = 4 x top-k {K}: dense MLA {d:.2f} ms/step, DSA {s:.2f} ms/step, DSA/dense {s / d:.2f}")
path = "benchmarks/results/cpu-2core_dsa.json"
runs = json.load(open(path)) if os.path.exists(path) else []
json.dump(runs + [run], open(path, "w"), indent=1)
