"""Batch-1 decode tokens/s of mini_infer against transformers (and llama.cpp) on the bundled SmolLM2.

Run: .venv/bin/python benchmarks/cpu_decode.py [--tokens 64 --repeats 3] [--quantization gguf|int4|int8]

The second peer, llama.cpp, runs the same Q4_1 file when `llama_cpp` (llama-cpp-python) is importable. It is
never installed by the project or CI; build it once with
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
  -DGGML_AMX_BF16=OFF" .venv/bin/pip install llama-cpp-python==0.3.36
(about 8 minutes on 2 cores; the native build crashes on this machine's AMX).
"""
import argparse
import contextlib
import io

import torch

from common import NUM_THREADS, cpu_share, noise_line, print_table, save_run, setup
from mini_infer import LLM, SamplingParams
from mini_infer.cli import decode_tokens_per_s, hf_peer
from mini_infer.weights import model_path


def llama_cpp_peer(prompt: str):
    "A `generate_n` for llama.cpp on the bundled GGUF (greedy, NUM_THREADS threads), or None."
    try:
        from llama_cpp import Llama
    except ImportError:
        return None, None
    import llama_cpp
    m = Llama(str(model_path(None)), n_threads=NUM_THREADS, n_ctx=512, verbose=False)
    toks = m.tokenize(prompt.encode())

    def generate_n(n):
        m.reset()
        out = []
        for t, _ in zip(m.generate(toks, temp=0.0, top_k=1), range(n)):
            out.append(t)
        return out
    return generate_n, llama_cpp.__version__


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--prompt", default="The capital of France is")
    p.add_argument("--quantization", default=None, help="mini_infer's weights: gguf (the file's own blocks), int4...")
    a = p.parse_args()
    env = setup()
    with contextlib.redirect_stderr(io.StringIO()):
        llm = LLM(dtype="float32", device="cpu", quantization=a.quantization)
        hf = hf_peer(None, torch.float32, "cpu")
    ids = llm.tokenizer.encode(a.prompt)
    params = lambda n: SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
    greedy = llm.generate([ids], params(16))[0].outputs[0].token_ids
    ours = decode_tokens_per_s(lambda n: llm.generate([ids], params(n)), a.tokens, a.repeats)
    x = torch.tensor([ids])

    def hf_generate(n):
        with torch.no_grad():
            hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                        pad_token_id=0)                                   # as `mini-infer bench`

    theirs = decode_tokens_per_s(hf_generate, a.tokens, a.repeats)
    cpp, cpp_version = llama_cpp_peer(a.prompt)
    cpp_tok_s = decode_tokens_per_s(cpp, a.tokens, a.repeats) if cpp else None
    with torch.no_grad():
        hf_greedy = hf.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=16,
                                min_new_tokens=16, pad_token_id=0)[0, len(ids):].tolist()
    agree = next((i for i, (u, v) in enumerate(zip(greedy, hf_greedy)) if u != v), len(greedy))
    attn = hf.config._attn_implementation
    print(f"environment: {env} (torch.set_num_threads({NUM_THREADS}))")
    print(f"workload   : SmolLM2-135M-Instruct GGUF dequantized to fp32, batch 1, prompt {len(ids)} tokens, "
          f"{a.tokens} new tokens; decode tok/s = (N-1)/(t_N - t_1), median of {a.repeats} after a warm-up\n")
    rows = [["mini_infer", ours, 1000 / ours], [f"transformers ({attn})", theirs, 1000 / theirs]]
    if cpp_tok_s:
        rows.append([f"llama.cpp {cpp_version} (Q4_1 file as is)", cpp_tok_s, 1000 / cpp_tok_s])
    print_table(["engine", "decode tok/s", "ms/token"], rows)
    print(f"\nratio mini_infer / transformers: {ours / theirs:.2f}x (mini_infer weights: {a.quantization or 'fp32'}; "
          f"greedy tokens equal to transformers' for the first {agree}/16)")
    if cpp_tok_s:
        print(f"ratio mini_infer / llama.cpp: {ours / cpp_tok_s:.2f}x")
    else:
        print("llama.cpp: not installed (see this file's docstring), not measured")
    share = cpu_share()
    print(noise_line(share))
    path = save_run("decode", {"env": env, "threads": NUM_THREADS, **share, "prompt_tokens": len(ids),
                               "new_tokens": a.tokens, "repeats": a.repeats, "mini_infer_tok_s": ours, "hf_tok_s": theirs,
                               "hf_attn": attn, "ratio": ours / theirs,
                               "quantization": a.quantization, "greedy_agree_16": agree,
                               "llama_cpp_tok_s": cpp_tok_s, "llama_cpp_version": cpp_version,
                               "ratio_vs_llama_cpp": ours / cpp_tok_s if cpp_tok_s else None})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
