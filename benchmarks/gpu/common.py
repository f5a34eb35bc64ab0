"""Shared plumbing of the GPU benchmarks: model shapes, synthetic checkpoints, HF twins, timing, result JSON.

Every script runs on the H200 machine in one command from the repository root, prints a table last and writes
<out>/<gpu>_<name>_<date>.json (out: --out, else $OUT, else benchmarks/results). Weights are synthetic (speed does
not depend on the values): mini_infer builds them with load_format="dummy", and the HF model gets the same tensors.
"""
import datetime
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

QWEN25_05B = dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=151936, hidden_size=896,
                  intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                  max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  hidden_act="silu", bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16")
QWEN25_7B = dict(QWEN25_05B, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                 num_key_value_heads=4, max_position_embeddings=32768, tie_word_embeddings=False, vocab_size=152064)
QWEN3_06B = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936, hidden_size=1024,
                 intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                 head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                 tie_word_embeddings=True, hidden_act="silu", attention_bias=False, bos_token_id=151643,
                 eos_token_id=151645, torch_dtype="bfloat16")
SHAPES = {"Qwen2.5-0.5B": QWEN25_05B, "Qwen2.5-7B": QWEN25_7B, "Qwen3-0.6B": QWEN3_06B}


def out_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("OUT") or ROOT / "benchmarks" / "results")


def config_dir(shape: str) -> str:
    "A folder holding only config.json of `shape` (for load_format='dummy')."
    d = tempfile.mkdtemp(prefix=shape + "-")
    Path(d, "config.json").write_text(json.dumps(SHAPES[shape]))
    return d


def hf_twin(llm, shape: str, dtype: torch.dtype, attn: str = "sdpa"):
    "The transformers model of `shape` holding the same weights as `llm`'s model (bf16 or fp32, on the GPU)."
    from transformers import AutoConfig, AutoModelForCausalLM
    d = dict(SHAPES[shape])
    cfg = AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("cuda"):
        hf = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn).eval()
    rot = hf.model.rotary_emb                       # RoPE frequencies computed on the CPU, as from_pretrained does:
    for name, buf in type(rot)(cfg).named_buffers():  # a GPU's pow need not give the CPU's last bit
        getattr(rot, name).copy_(buf)
    ours = {k: v for k, v in llm.model.state_dict().items()                  # merged layers (CUDA) are views of
            if ".qkv_proj." not in k and ".gate_up_proj." not in k}         # the checkpoint's q/k/v, gate/up
    missing, unexpected = hf.load_state_dict(ours, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    return hf


def free_cuda() -> None:
    "Return the memory of deleted models to the device (callers `del` their references first)."
    gc.collect()
    torch.cuda.empty_cache()


def copy_bandwidth(gib: float = 4.0) -> float:
    "Device-to-device copy, bytes read + written per second (GB/s), median of 20."
    x = torch.empty(int(gib * 2**30) // 2, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty_like(x)
    ts = []
    for _ in range(25):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); y.copy_(x); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    del x, y
    return 2 * gib * 2**30 / statistics.median(ts[5:]) / 1e9


def seconds(fn, repeats: int = 3) -> float:
    "Median wall seconds of fn() after one warm-up, the GPU synchronised around each call."
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def ms_per_step(gen, n: int = 129, repeats: int = 5) -> float:
    """ms per decode step: (time of gen(2n - 1) - time of gen(n)) / (n - 1), medians of `repeats` runs. Both runs
    have the same prefill, so only decode steps remain in the difference (gen(n) - gen(1) carried the prefill's
    noise: up to 0.3 ms per step on the H200)."""
    return (seconds(lambda: gen(2 * n - 1), repeats) - seconds(lambda: gen(n), repeats)) / (n - 1) * 1e3


def env() -> dict:
    import transformers
    import triton
    return {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__, "triton": triton.__version__,
            "transformers": transformers.__version__, "date": datetime.date.today().isoformat(),
            "commit": os.environ.get("MINI_INFER_COMMIT") or subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()}


def save(name: str, res: dict, out: str | None) -> Path:
    "Write <out>/<gpu>_<name>_<date>.json."
    gpu = res["env"]["gpu"].lower().replace("nvidia ", "nvidia-").replace(" ", "-")
    gpu = "cpu-2core" if gpu == "cpu" else gpu
    path = out_dir(out) / f"{gpu}_{name}_{res['env']['date']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1) + "\n")
    print("wrote", path)
    return path


def table(header: list[str], rows: list[list]) -> str:
    cells = [header] + [[f"{c:,.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w[i]) for i, c in enumerate(r)) for r in cells)


def print_rows(rows: list[dict]) -> None:
    "A fixed-width text table of a list of dicts."
    if not rows:
        return
    keys = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: f"{v:.2e}" if isinstance(v, float) and abs(v) < 0.01 and v else (
        f"{v:,.2f}" if isinstance(v, float) else str(v))
    cells = [keys] + [[fmt(r.get(k, "")) for k in keys] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(keys))]
    for j, c in enumerate(cells):
        print("  ".join(x.rjust(w) for x, w in zip(c, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def graphed_us(calls, eager: bool = False) -> float:
    """Median time of one of `calls` when all run in one CUDA graph (no host overhead), in microseconds; with
    `eager` (the CPU interpreter's smoke runs) one eager call, timed once."""
    for c in calls:
        c()                                                                # compile and warm up outside the capture
    if eager:
        t0 = time.perf_counter()
        calls[0]()
        return (time.perf_counter() - t0) * 1e6
    from triton.testing import do_bench
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    us = do_bench(g.replay, return_mode="median") * 1e3 / len(calls)
    del g
    return us
