"""Run notebooks on a GPU machine without Jupyter, keeping the outputs of their `#| cuda` cells.

The GPU machine has no IPython/nbdev; this runs every code cell of a notebook in order in one namespace (working
directory: the notebook's folder), skipping cells flagged notest/slow/multigpu or `eval: false` and lines of shell
magics. A failing ordinary cell is reported and the run goes on; a failing `#| cuda` cell keeps its traceback as
its output and makes the exit status 1. Only the `#| cuda` cells' outputs are written, into OUT/NAME.ipynb.

    python tools/run_cuda_cells.py nbs/21_paged_attention.ipynb [...] --out DIR      (on the GPU machine)
    python tools/run_cuda_cells.py --merge DIR                                      (here: copy outputs into nbs/)
"""
import argparse
import ast
import base64
import contextlib
import io
import itertools
import json
import linecache
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"notest", "slow", "multigpu"}


def directives(src: str) -> dict:
    "The cell's `#| name args` lines as {name: args}."
    out = {}
    for line in src.splitlines():
        if line.startswith("#|"):
            name, *args = line[2:].strip().split(maxsplit=1) or [""]
            out[name.rstrip(":")] = args[0] if args else ""
        elif line.strip():
            break
    return out


def figures_as_outputs() -> list:
    "Every open matplotlib figure as a PNG display_data output (then closed)."
    if "matplotlib.pyplot" not in sys.modules:
        return []
    plt = sys.modules["matplotlib.pyplot"]
    outs = []
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png", dpi=90, bbox_inches="tight")
        outs.append({"output_type": "display_data", "metadata": {},
                     "data": {"image/png": base64.b64encode(buf.getvalue()).decode(), "text/plain": ["<Figure>"]}})
    plt.close("all")
    return outs


_CELL_NUMBERS = itertools.count()


def run_cell(src: str, ns: dict) -> tuple[list, bool]:
    "Execute one cell; return (nbformat outputs, ok)."
    code = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("!", "%"))) + "\n"
    fname = f"<cell-{next(_CELL_NUMBERS)}>"                # in linecache, so inspect (and @triton.jit) finds the source
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
    out, outputs, ok = io.StringIO(), [], True
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            tree = ast.parse(code)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, fname, "exec"), ns)
            value = eval(compile(ast.Expression(last.value), fname, "eval"), ns) if last else None
        except Exception:
            traceback.print_exc()
            ok, value = False, None
    if out.getvalue():
        outputs.append({"output_type": "stream", "name": "stdout", "text": out.getvalue().splitlines(True)})
    outputs += figures_as_outputs()
    if value is not None:
        outputs.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                        "data": {"text/plain": repr(value).splitlines(True)}})
    return outputs, ok


def run_notebook(path: Path, out_dir: Path) -> bool:
    nb = json.loads(path.read_text())
    ns = {"__name__": "__main__"}
    cwd, all_ok = os.getcwd(), True
    os.chdir(path.parent)
    try:
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            d = directives(src)
            if SKIP & d.keys() or d.get("eval", "").lower() == "false":
                continue
            t0 = time.perf_counter()
            outputs, ok = run_cell(src, ns)
            if "cuda" in d:
                cell["outputs"] = outputs
                all_ok &= ok
                print(f"{path.name} cuda cell {cell.get('id')}: {'ok' if ok else 'FAILED'} "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
                print("".join("".join(o.get("text", [])) for o in outputs)[-3000:], flush=True)
            elif not ok:
                print(f"{path.name}: ordinary cell {cell.get('id')} failed (going on):\n"
                      + "".join("".join(o.get("text", [])) for o in outputs)[-1500:], flush=True)
    finally:
        os.chdir(cwd)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return all_ok


def merge(from_dir: Path) -> None:
    "Copy the outputs of `#| cuda` cells from FROM_DIR/*.ipynb into the same cells (by id) of nbs/."
    for src in sorted(from_dir.glob("*.ipynb")):
        dst = ROOT / "nbs" / src.name
        new = {c.get("id"): c for c in json.loads(src.read_text())["cells"]}
        nb = json.loads(dst.read_text())
        n = 0
        for cell in nb["cells"]:
            if cell["cell_type"] == "code" and "cuda" in directives("".join(cell["source"])) and cell.get("id") in new:
                cell["outputs"] = new[cell["id"]].get("outputs", [])
                n += 1
        dst.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        print(f"{dst.relative_to(ROOT)}: outputs of {n} cuda cells merged")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("nbs", nargs="*")
    ap.add_argument("--out", default=os.environ.get("OUT", "cuda_outputs"))
    ap.add_argument("--merge", default=None)
    a = ap.parse_args()
    if a.merge:
        merge(Path(a.merge))
        raise SystemExit(0)
    sys.path.insert(0, str(ROOT))
    ok = all([run_notebook(Path(p).resolve(), Path(a.out)) for p in a.nbs])
    raise SystemExit(0 if ok else 1)
