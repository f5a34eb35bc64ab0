"""Multi-node, simulated: the chapter-60 code launched as 2 "nodes" x 1 process by `torchrun --nnodes 2` over a
loopback rendezvous; greedy tokens identical to one process."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mini_infer.engine.llm_engine import LLM
from mini_infer.engine.sampling import SamplingParams
from mini_infer.oracle import hf_tiny_model, save_tiny
from mini_infer.testing import tiny_config

from conftest import ENV, free_port

SCRIPT = Path(__file__).with_name("tp_torchrun_script.py")


def test_torchrun_two_nodes(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun is not installed beside this Python")
    ckpt = save_tiny(hf_tiny_model(tiny_config("llama")), tmp_path / "llama")
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 384, (n,), generator=g).tolist() for n in (4, 17, 30)]
    (tmp_path / "prompts.json").write_text(json.dumps(prompts))
    ref = [o.outputs[0].token_ids for o in LLM(ckpt, num_kv_blocks=64).generate(
        prompts, SamplingParams(temperature=0.0, max_tokens=8, min_tokens=8))]
    port, out = free_port(), tmp_path / "out.json"
    env = {**ENV, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([str(torchrun), "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(r),
                               "--master-addr", "127.0.0.1", "--master-port", str(port), str(SCRIPT), str(ckpt),
                               str(tmp_path / "prompts.json"), str(out)], env=env) for r in range(2)]
    try:
        codes = [p.wait(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0, 0]
    assert json.loads(out.read_text()) == ref
