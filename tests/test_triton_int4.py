"""Chapter 41a's int4 GPU path, run on the CPU under Triton's interpreter.

On CUDA an engine with `quantization="int4..."` (or "gguf") runs the Triton kernel set, whose model passes quantize,
merge q/k/v and gate/up into one `Int4Linear` each (rows, scales and minimums concatenated) and then set every int4
layer's kernel hook to chapter 41a's `int4_linear_kernel` (the `triton_int4` pass). This test asks a CPU engine for
`kernels="triton"` under `TRITON_INTERPRET=1` (process-wide, hence a subprocess) and compares it with the int4 fp32
reference path (`kernels="reference"`): the pass ran and hooked every merged layer, fp32 logits agree to the kernels'
rounding (Eq. (G) of chapter 41a), greedy continuations are identical token for token.
"""
import subprocess
import sys
import textwrap

from conftest import ENV, ROOT

SCRIPT = textwrap.dedent("""
    import tempfile, torch
    from mini_infer import LLM, SamplingParams
    from mini_infer.oracle import hf_tiny_model, save_tiny
    from mini_infer.quant.int4 import Int4Linear
    from mini_infer.kernels.triton_int4 import int4_linear_kernel
    from mini_infer.testing import tiny_config
    g = torch.Generator().manual_seed(0)
    cfg = tiny_config("qwen2")
    prompts = [torch.randint(3, cfg["vocab_size"], (n,), generator=g).tolist() for n in (5, 19, 1)]
    params = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    with tempfile.TemporaryDirectory() as d:
        path = save_tiny(hf_tiny_model(cfg), d)
        ref, gpu = (LLM(path, block_size=4, max_num_batched_tokens=16, quantization="int4_g32", kernels=kernels)
                    for kernels in ("reference", "triton"))
    passes = dict(gpu.engine.passes)
    hooked = [m for m in gpu.model.modules() if isinstance(m, Int4Linear) and m.kernel is int4_linear_kernel]
    assert "triton_int4" in passes and "triton_int4" not in dict(ref.engine.passes), list(passes)
    layer = gpu.model.model.layers[0]
    assert layer.self_attn.qkv_proj in hooked and layer.mlp.gate_up_proj in hooked, hooked
    assert passes["triton_int4"] == len(hooked), (passes["triton_int4"], len(hooked))
    diff = (gpu.logits(prompts[1]) - ref.logits(prompts[1])).abs().max().item()
    assert diff < 1e-4, diff
    a = [o.outputs[0].token_ids for o in ref.generate(prompts, params)]
    b = [o.outputs[0].token_ids for o in gpu.generate(prompts, params)]
    assert a == b, (a, b)
    print(f"int4_g32: passes {list(passes)}; {len(hooked)} hooked int4 layers; logits max diff {diff:.1e}; "
          f"3 prompts x 5 greedy tokens identical")
""")


def test_int4_triton_path_matches_the_reference():
    env = {**ENV, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical" in r.stdout, r.stdout
    print(r.stdout)
