"""First run of the whole engine on a GPU (eager, no CUDA graphs yet): a random Qwen2.5-0.5B-shaped checkpoint in bf16.

Measures batch-1 decode ms/step with the PyTorch paged backend and the Triton decode kernel, the same for HF
transformers `generate` on the same checkpoint, and a 64-request throughput; checks greedy agreement with HF in fp32
on a short prompt. Usage (H200 machine): python benchmarks/gpu/experiments/engine_smoke.py [--out DIR]
"""
import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

QWEN05 = dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=151936, hidden_size=896,
              intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
              max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
              hidden_act="silu", bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16")


def save_random(path: Path) -> None:
    "A random checkpoint of QWEN05 written by transformers (config.json + safetensors)."
    from transformers import AutoConfig, AutoModelForCausalLM
    d = dict(QWEN05)
    cfg = AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    m.save_pretrained(path)


def time_decode(fn, n: int) -> float:
    "ms per decode step from timing fn(1) and fn(n) (median of 3 after a warm-up)."
    def med(k):
        fn(k); torch.cuda.synchronize()
        ts = []
        for _ in range(3):
            t = time.perf_counter(); fn(k); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
        return sorted(ts)[1]
    return (med(n) - med(1)) / (n - 1) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "results"))
    a = ap.parse_args()
    from mini_infer import LLM, SamplingParams
    from mini_infer.layers.attention import Attention
    from mini_infer.engine_config import KERNELS
    from transformers import AutoModelForCausalLM
    tmp = Path(tempfile.mkdtemp())
    save_random(tmp)
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "date": datetime.date.today().isoformat(),
           "shape": "Qwen2.5-0.5B", "dtype": "bfloat16", "cuda_graphs": False}
    llm = LLM(str(tmp), dtype="bfloat16", device="cuda", max_num_batched_tokens=4096)
    prompt = list(range(1000, 1016))
    gen = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    for name in ("paged", "triton"):
        for m in llm.model.modules():
            if isinstance(m, Attention):
                m.backend = KERNELS.lookup(name).attention
        res[f"mini_infer_{name}_ms_per_step"] = time_decode(gen, 64)
    hf = AutoModelForCausalLM.from_pretrained(str(tmp), dtype=torch.bfloat16).cuda().eval()
    x = torch.tensor([prompt], device="cuda")
    def hf_gen(n):
        with torch.no_grad():
            hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                        pad_token_id=0)
    res["hf_ms_per_step"] = time_decode(hf_gen, 64)
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(100, 1025, (64, 2), generator=g).tolist()
    prompts = [torch.randint(0, 150000, (p,), generator=g).tolist() for p, _ in lens]
    params = [SamplingParams(temperature=0, max_tokens=o, ignore_eos=True) for _, o in lens]
    torch.cuda.synchronize(); t = time.perf_counter()
    outs = llm.generate(prompts, params)
    torch.cuda.synchronize(); dt = time.perf_counter() - t
    res["throughput_64req_tok_s"] = sum(len(o.outputs[0].token_ids) for o in outs) / dt
    f32 = LLM(str(tmp), dtype="float32", device="cuda")
    hf32 = AutoModelForCausalLM.from_pretrained(str(tmp), dtype=torch.float32, attn_implementation="eager").cuda().eval()
    ours = f32.generate([prompt], SamplingParams(temperature=0, max_tokens=32, ignore_eos=True))[0].outputs[0].token_ids
    with torch.no_grad():
        ref = hf32.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=32,
                            min_new_tokens=32, pad_token_id=0)[0, len(prompt):].tolist()
    res["fp32_greedy_32_identical_to_hf"] = ours == ref
    print(json.dumps(res, indent=1))
    out = Path(a.out) / f"nvidia-h200_engine_smoke_{res['date']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
