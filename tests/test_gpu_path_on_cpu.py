"""The model transformations of the CUDA path, run on the CPU under Triton's interpreter.

On CUDA the engine's default `kernels="triton"` runs the model passes registered for the Triton kernel set
(chapter 16's `prepare_model`): q/k/v and gate/up merged into one matrix each (chapter 10), the fused Triton norms,
RoPE and SiLU-and-mul (10a), and the Triton matrix-vector kernel for one-row products (40a); its attention backend is
the Triton decode kernel, which brings the one-launch K/V cache write (21a).
CI has no GPU, so this test asks a CPU engine for `kernels="triton"` under `TRITON_INTERPRET=1` (process-wide, hence
a subprocess) and compares it with the plain CPU engine (the paged backend): fp32 logits to summation-order rounding, greedy
continuations token for token, through the batched paged engine, for Qwen2 (q/k/v biases) and Qwen3 (q/k norms on
the merged views), in fp32 and with int8 weights (chapter 40's quantization before the merge, as on CUDA).
"""
import os
import subprocess
import sys
import textwrap

from conftest import ENV, ROOT

SCRIPT = textwrap.dedent("""
    import tempfile, torch
    from mini_infer import LLM, SamplingParams
    from mini_infer.oracle import hf_tiny_model, save_tiny
    from mini_infer.quant.int8 import quantize_model
    from mini_infer.testing import tiny_config
    g = torch.Generator().manual_seed(0)
    for family in ("qwen2", "qwen3"):
        cfg = tiny_config(family)
        prompts = [torch.randint(3, cfg["vocab_size"], (n,), generator=g).tolist() for n in (5, 19, 12, 1)]
        params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
        with tempfile.TemporaryDirectory() as d:
            path = save_tiny(hf_tiny_model(cfg), d)
            for quant in (None, "int8"):
                ref, gpu = (LLM(path, block_size=4, max_num_batched_tokens=16, quantization=quant, kernels=kernels)
                            for kernels in ("paged", "triton"))
                modules = list(gpu.model.modules())
                counts = {"merged": sum(getattr(m, a, None) is not None for m in modules
                                        for a in ("qkv_proj", "gate_up_proj")),
                          "fused": sum(getattr(m, "kernel", None) is not None for m in modules)}
                stores = {m.store.__name__ for m in gpu.model.modules() if hasattr(m, "store")}
                assert stores == {"triton_store_kv"}, stores            # K and V in one launch, as on CUDA
                layers = cfg["num_hidden_layers"]
                assert counts["merged"] == 2 * layers and counts["fused"] > 0, counts
                diff = (gpu.logits(prompts[1]) - ref.logits(prompts[1])).abs().max().item()
                assert diff < 1e-4, (family, quant, diff)
                a = [o.outputs[0].token_ids for o in ref.generate(prompts, params)]
                b = [o.outputs[0].token_ids for o in gpu.generate(prompts, params)]
                assert a == b, (family, quant, a, b)
                print(f"{family} {quant or 'fp32'}: {counts}, logits max diff {diff:.1e}, 4 prompts x 8 greedy tokens identical")
""")


def test_triton_kernel_set_matches_the_cpu_engine():
    env = {**ENV, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("identical") == 4, r.stdout
