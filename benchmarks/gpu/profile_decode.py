"""Where the GPU time of a batch-1 decode step goes, kernel by kernel (torch.profiler, eager engine so that every
kernel is visible; the CUDA-graph step launches the same kernels).

    python benchmarks/gpu/profile_decode.py [--shape Qwen2.5-7B] [--quantization int8] [--steps 16]   (H200, ~1 min)
"""
import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from common import config_dir, env, save, table


def main() -> None:
    from mini_infer import LLM, SamplingParams
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="Qwen2.5-7B")
    ap.add_argument("--quantization", default=None)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    llm = LLM(config_dir(a.shape), dtype="bfloat16", device="cuda", load_format="dummy", quantization=a.quantization,
              max_model_len=2048, max_num_seqs=8, num_kv_blocks=1024, enforce_eager=True)
    prompt = list(range(1000, 1016))
    run = lambda n: llm.generate([prompt], SamplingParams(temperature=0, max_tokens=n, ignore_eos=True))
    run(4); torch.cuda.synchronize()
    per_kernel = {}
    for n in (1, 1 + a.steps):                    # the difference of the two runs is `steps` decode steps
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run(n); torch.cuda.synchronize()
        acc = defaultdict(lambda: [0.0, 0])
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                acc[e.name][0] += e.device_time_total
                acc[e.name][1] += 1
        per_kernel[n] = acc
    base, full = per_kernel[1], per_kernel[1 + a.steps]
    rows = []
    for name, (us, count) in full.items():
        b_us, b_count = base.get(name, (0.0, 0))
        d_us, d_count = (us - b_us) / a.steps, (count - b_count) / a.steps
        if d_count > 0:
            rows.append({"kernel": name[:90], "us_per_step": d_us, "launches_per_step": d_count})
    rows.sort(key=lambda r: -r["us_per_step"])
    total = sum(r["us_per_step"] for r in rows)
    res = {"env": env(), "shape": a.shape, "weights": a.quantization or "bf16", "gpu_us_per_step": total,
           "launches_per_step": sum(r["launches_per_step"] for r in rows), "kernels": rows}
    save(f"profile_decode_{a.shape}_{a.quantization or 'bf16'}", res, a.out)
    print(table(["kernel", "us/step", "launches/step", "%"],
                [[r["kernel"], r["us_per_step"], r["launches_per_step"], 100 * r["us_per_step"] / total]
                 for r in rows[:30]]))
    print(f"GPU time per decode step {total:,.0f} us in {res['launches_per_step']:.0f} launches ({a.shape}, "
          f"{res['weights']}, eager)")


if __name__ == "__main__":
    main()
