"""Run by tests/test_torchrun.py under `torchrun --nnodes 2 --nproc-per-node 1`: the same program on every rank;
LLM(...) returns on rank 0 only (chapter 60's `env` executor), which writes the greedy tokens as JSON."""
import json
import sys

from mini_infer.engine.llm_engine import LLM
from mini_infer.engine.sampling import SamplingParams

ckpt, prompts_file, out_file = sys.argv[1:4]
llm = LLM(ckpt, tensor_parallel_size=2, distributed_executor_backend="env", num_kv_blocks=64)
outs = llm.generate(json.load(open(prompts_file)), SamplingParams(temperature=0.0, max_tokens=8, min_tokens=8))
json.dump([o.outputs[0].token_ids for o in outs], open(out_file, "w"))
llm.shutdown()
