"""Chapter 60 over two gloo ranks (one worker process): greedy tokens of tensor_parallel_size=2 (and expert
parallelism for the MoE families) identical to one process over 16 prompts; logits within a stated tolerance."""
import torch
import pytest

from mini_infer.engine.llm_engine import LLM
from mini_infer.engine.sampling import SamplingParams
from mini_infer.oracle import hf_tiny_model, save_tiny
from mini_infer import testing
from mini_infer.testing import set_test_threads, tiny_config

set_test_threads()
PARAMS = SamplingParams(temperature=0.0, max_tokens=8, min_tokens=8)
OPTIONS = dict(num_kv_blocks=160, max_num_batched_tokens=64)


def prompts():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(3, 384, (int(n),), generator=g).tolist()
            for n in torch.randint(3, 40, (16,), generator=g)]


@pytest.mark.parametrize("family,ep", [("llama", False), ("qwen3", False), ("mixtral", False), ("mixtral", True),
                                       ("deepseek_v3", False), ("deepseek_v3", True)])
def test_tp2_greedy_identical(tmp_path, family, ep):
    ckpt = save_tiny(hf_tiny_model(tiny_config(family)), tmp_path / family)
    ps = prompts()
    one = LLM(ckpt, **OPTIONS)
    ref = [o.outputs[0].token_ids for o in one.generate(ps, PARAMS)]
    ref_logits = one.logits(ps[0])
    two = LLM(ckpt, tensor_parallel_size=2, enable_expert_parallel=ep, **OPTIONS)
    try:
        out = [o.outputs[0].token_ids for o in two.generate(ps, PARAMS)]
        diff = testing.test_close(two.logits(ps[0]), ref_logits, atol=1e-4,
                          why="the all-reduce adds the ranks' partial sums in another order")
    finally:
        two.shutdown()
    print(f"{family} ep={ep}: max |logit diff| {diff:.2e}")
    assert out == ref
