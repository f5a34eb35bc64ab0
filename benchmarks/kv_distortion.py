"""How much each KV codec distorts the keys and values SmolLM2 actually caches (issue 18): the relative MSE
||x - x_hat||^2 / ||x||^2 of every layer's K and V rows, against TurboQuant's Theorem 1 (about 0.009 at 4 bits, 0.03
at 3 bits for unit vectors in high dimension), and how much the codec shrinks a key (|k_hat| / |k|, which scales
every attention logit of that key). A codec check on real data, not a speed figure.

    python benchmarks/kv_distortion.py [--tokens 512]         (about a minute)

Keys and values are those the bundled SmolLM2-135M-Instruct (fp32, kernels="torch") writes for the first
`--tokens` tokens of /usr/share/common-licenses/GPL-3 (the perplexity text of benchmarks/kv_quality.py), captured at
the attention layers' inputs, so after RoPE, exactly what the cache stores. Appends a run to
benchmarks/results/cpu-2core_kv_distortion_<date>.json.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import print_table, save_run, setup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    a = ap.parse_args()
    env = setup()
    from mini_infer import LLM
    from mini_infer.layers.attention import Attention
    from mini_infer.quant.fp8_kv import FP8Codec
    from mini_infer.quant.kv_quant import TurboQuantMSE
    llm = LLM(kernels="torch")
    ids = llm.tokenizer.encode(Path("/usr/share/common-licenses/GPL-3").read_text())[:a.tokens]
    caps = []
    hooks = [m.register_forward_hook(lambda mod, args, out: caps.append((args[1].detach(), args[2].detach())))
             for m in llm.model.modules() if isinstance(m, Attention)]
    llm.logits(ids)
    for h in hooks:
        h.remove()
    D = llm.config.head_dim
    rel = lambda x, y: float(((x - y) ** 2).sum() / (x ** 2).sum())
    results, rows = {}, []
    for name, codec in (("fp8", FP8Codec(D)), ("turbo4", TurboQuantMSE(4, D)), ("turbo3", TurboQuantMSE(3, D))):
        dk, dv, shrink = [], [], []
        for k, v in caps:
            k3, v3 = k.reshape(k.shape[0], -1, D).float(), v.reshape(v.shape[0], -1, D).float()
            kh = codec.decode(codec.encode(k3), torch.float32)
            vh = codec.decode(codec.encode(v3), torch.float32)
            dk.append(rel(k3, kh))
            dv.append(rel(v3, vh))
            shrink.append(float((kh.norm(dim=-1) / k3.norm(dim=-1)).mean()))
        results[name] = {"key_rel_mse_per_layer": dk, "value_rel_mse_per_layer": dv, "key_norm_ratio_per_layer": shrink}
        rows.append([name, sum(dk) / len(dk), min(dk), max(dk), sum(dv) / len(dv), sum(shrink) / len(shrink)])
    print(env)
    print_table(["codec", "key rel MSE", "min layer", "max layer", "value rel MSE", "|k_hat|/|k|"],
                [[r[0]] + [f"{x:.4f}" for x in r[1:]] for r in rows])
    path = save_run("kv_distortion", {"env": env, "model": "SmolLM2-135M-Instruct Q4_1 GGUF (dequantized, fp32)",
                                      "tokens": len(ids), "layers": len(caps), "head_dim": D, "results": results})
    print(f"appended to {path}")


if __name__ == "__main__":
    main()
