"""Chapter 61 over two gloo ranks: 16 requests through a prefill process and a decode process, greedy tokens
identical to the colocated engine (tiny Llama, tiny DeepSeek-V3 with MLA latents), the KV bytes moved per request
equal to the blocks' bytes from the stream shapes; a damaged transfer is retried once, a persistent one ends its
request with an error while the others complete."""
import faulthandler
import os

import pytest
import torch

os.environ.setdefault("MINI_INFER_DIST_TIMEOUT", "60")        # every decode-side wait is bounded

from mini_infer.engine.llm_engine import LLM
from mini_infer.engine.sampling import SamplingParams
from mini_infer.oracle import hf_tiny_model, save_tiny
from mini_infer.testing import set_test_threads, tiny_config

set_test_threads()
PARAMS = SamplingParams(temperature=0.0, max_tokens=8, min_tokens=8)
OPTIONS = dict(num_kv_blocks=160, max_num_batched_tokens=64)


@pytest.fixture(autouse=True)
def watchdog():
    "A hang fails the run: the process dumps its stacks and exits after 120 s."
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def prompts():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(3, 384, (int(n),), generator=g).tolist()
            for n in torch.randint(3, 40, (16,), generator=g)]


@pytest.fixture(scope="module", params=["llama", "deepseek_v3"])
def pair(request, tmp_path_factory):
    "(family, colocated LLM, disaggregated LLM) sharing one prefill process per family."
    family = request.param
    ckpt = save_tiny(hf_tiny_model(tiny_config(family)), tmp_path_factory.mktemp(family) / family)
    pd = LLM(ckpt, kv_transfer_config={"kv_role": "kv_consumer"}, **OPTIONS)
    yield family, LLM(ckpt, **OPTIONS), pd
    pd.shutdown()


def test_pd_greedy_identical(pair):
    family, one, pd = pair
    ps = prompts()
    ref = [o.outputs[0].token_ids for o in one.generate(ps, PARAMS)]
    outs = pd.generate(ps, PARAMS)
    assert [o.outputs[0].token_ids for o in outs] == ref
    e = pd.engine
    per_block = sum(e.kv_block_bytes.values())
    moved = [o.metrics["kv_transfer_bytes"] for o in outs]
    assert moved == [-(-len(p) // e.block_size) * per_block for p in ps]
    assert all(o.metrics["kv_transfer_attempts"] == 1 for o in outs)
    print(f"{family}: KV bytes moved per request {moved}")


def test_pd_transfer_faults(pair):
    family, one, pd = pair
    ps = prompts()[:6]
    ref = [o.outputs[0].token_ids for o in one.generate(ps, PARAMS)]
    first = pd._next_id
    pd.engine.faults = {str(first + 1): 1, str(first + 4): 99}      # once: retried; always: fails
    outs = pd.generate(ps, PARAMS)
    for i, o in enumerate(outs):
        if i == 4:
            assert o.outputs[0].finish_reason == "error" and "KVTransferError" in o.outputs[0].error
        else:
            assert o.outputs[0].token_ids == ref[i]
    assert outs[1].metrics["kv_transfer_attempts"] == 2
    assert pd.engine.block_manager.num_free_blocks == pd.engine.num_kv_blocks     # nothing leaked
    again = pd.generate(ps[4:5], PARAMS)                   # the pair still serves afterwards
    assert again[0].outputs[0].token_ids == ref[4]


def test_pd_prefill_process_dies(pair):
    "Last on each pair: its prefill process dies; the decode engine ends with EngineDeadError, never a hang."
    from mini_infer.engine.llm_engine import EngineDeadError
    family, one, pd = pair
    pd.engine.procs[0].kill()
    pd.engine.procs[0].wait()
    with pytest.raises(EngineDeadError, match="prefill instance failed"):
        pd.generate(prompts()[:2], PARAMS)


def test_pd_server(tiny_model, serve_logs):
    "`mini-infer serve --kv-transfer-config`: the same greedy completions as the colocated engine."
    import httpx
    from conftest import Server
    texts = ["The capital of France is", "One, two, three,", "Hello"]
    ref = [o.outputs[0].text for o in LLM(tiny_model, num_kv_blocks=64).generate(
        texts, SamplingParams(temperature=0.0, max_tokens=6))]
    s = Server(str(tiny_model), "--num-kv-blocks", "64", "--kv-transfer-config", '{"kv_role": "kv_consumer"}', log_dir=serve_logs)
    try:
        answers = [httpx.post(f"{s.url}/v1/completions", timeout=60, json={
            "model": tiny_model.name, "prompt": t, "max_tokens": 6, "temperature": 0}).json() for t in texts]
    finally:
        s.stop()
    assert [a["choices"][0]["text"] for a in answers] == ref
    assert all(a["usage"]["completion_tokens"] == 6 for a in answers), answers
