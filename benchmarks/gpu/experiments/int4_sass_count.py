"""Instructions per weight in the loop of chapter 41a's int4 kernels, counted in sm_90 machine code without a GPU.

Triton compiles for a target it is given (here sm_90, Hopper) on the CPU, with its bundled ptxas; nvdisasm lists the
machine code (SASS). This script compiles `int4_gemv_kernel` or `int4_dot_kernel` for one configuration, with the
16-divisibility that a real call's pointers, sizes and strides get, finds the main loop (the block a backward branch
returns to), and prints its instruction mix per weight of the tile and the registers used. An H100/H200
multiprocessor issues at most 128 thread-instructions per clock, so at I instructions per weight a kernel cannot
exceed 128 / I weights per clock per multiprocessor, whatever the memory does.

    python benchmarks/gpu/experiments/int4_sass_count.py gemv --block-m 1 --block-n 8 --block-w 512 --warps 4
    python benchmarks/gpu/experiments/int4_sass_count.py dot --block-m 16 --block-n 64 --group 64 --warps 4
"""
import argparse
import collections
import os
import re
import subprocess
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

BIN = Path(triton.__file__).parent / "backends/nvidia/bin"
ARGS = ["x_ptr", "w_ptr", "scale_ptr", "min_ptr", "bias_ptr", "y_ptr", "M", "N", "K", "stride_xm", "stride_wn",
        "stride_sn", "stride_ym"]
DIV16 = ARGS[:6] + ["N", "K", "stride_xm", "stride_wn", "stride_ym"]


def compile_sm90(fn, signature: dict, constexprs: dict, **options):
    "Compile a @triton.jit function for sm_90 with 16-divisible pointers, sizes and strides."
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in DIV16 if n in fn.arg_names}
    src = ASTSource(fn=fn, signature={**signature, **{c: "constexpr" for c in constexprs}}, constexprs=constexprs,
                    attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def loop_mix(sass: str) -> collections.Counter:
    "Opcode counts of the largest block that a backward branch jumps to (the main loop)."
    lines = sass.splitlines()
    labels = {l[:-1]: i for i, l in enumerate(lines) if re.match(r"^\.L_x_\d+:$", l)}
    best = (0, 0, 0)
    for i, l in enumerate(lines):
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", l)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            best = max(best, (i - labels[m.group(1)], labels[m.group(1)], i))
    ops = collections.Counter()
    for l in lines[best[1]:best[2] + 1]:
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", l)
        if m:
            ops[m.group(1)] += 1
    return ops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", choices=["gemv", "dot"])
    ap.add_argument("--block-m", type=int, default=1)
    ap.add_argument("--block-n", type=int, default=8)
    ap.add_argument("--block-w", type=int, default=512, help="gemv: int32 words per tile")
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--symmetric", action="store_true")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3, help="dot only")
    a = ap.parse_args()
    from mini_infer.kernels import triton_int4 as k4
    if a.kernel == "gemv":
        sig = dict(zip(ARGS, ["*bf16", "*i32"] + ["*bf16"] * 4 + ["i32"] * 7))
        c = compile_sm90(k4.int4_gemv_kernel, sig, dict(GROUP=a.group, BLOCK_M=a.block_m, BLOCK_N=a.block_n,
                                                        BLOCK_W=a.block_w, HAS_MIN=not a.symmetric, HAS_BIAS=False),
                         num_warps=a.warps)
        weights = a.block_n * a.block_w * 8                       # weights of the matrix per loop iteration
    else:
        sig = dict(zip(ARGS, ["*bf16", "*u8"] + ["*bf16"] * 4 + ["i32"] * 7))
        c = compile_sm90(k4.int4_dot_kernel, sig, dict(GROUP=a.group, BLOCK_M=a.block_m, BLOCK_N=a.block_n, SPLIT_K=1,
                                                       HAS_MIN=not a.symmetric, HAS_BIAS=False,
                                                       DOT_DTYPE=tl.bfloat16),
                         num_warps=a.warps, num_stages=a.stages)
        weights = a.block_n * a.group                             # one group per iteration
    cubin = Path("/tmp/int4_sass_count.cubin")
    cubin.write_bytes(c.asm["cubin"])
    sass = subprocess.run([str(BIN / "nvdisasm"), "-c", str(cubin)], capture_output=True, text=True).stdout
    usage = subprocess.run([str(BIN / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    ops = loop_mix(sass)
    per_thread = weights / (32 * a.warps)
    total = sum(ops.values())
    resources = " ".join(re.findall(r"(?:REG|STACK):\d+", usage))
    print(f"{a.kernel} {vars(a)}: {resources}")
    print(f"loop: {total} instructions per thread for {per_thread:.0f} weights per thread: "
          f"{total / per_thread:.2f} per weight (of the matrix; it serves {a.block_m} rows of x)")
    print("  " + ", ".join(f"{op} {n / per_thread:.2f}" for op, n in ops.most_common(12)))


if __name__ == "__main__":
    main()
