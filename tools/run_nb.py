"""Execute notebooks in place so their outputs are committed for the book (skips the flags nbdev_test skips).

Usage: python tools/run_nb.py nbs/12_llama.ipynb [...] [--force cuda]
"""
import argparse
import os
import sys
from pathlib import Path

from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell
from nbdev.config import get_config
from nbdev.process import NBProcessor
from nbdev.frontmatter import FrontmatterProc


def run(fn: Path, force: set) -> None:
    "Run every cell of `fn` except flagged ones, write outputs back into the file."
    flags = set(get_config().tst_flags.split()) - force
    nb = read_nb(fn)
    directives = [getattr(c, "directives_", {}) or {} for c in NBProcessor(fn, procs=FrontmatterProc, process=True).nb.cells]

    def skip(cell):
        if cell.cell_type != "code": return True
        d = directives[cell.idx_]
        if d.get("eval:", [""])[0].lower() == "false": return True
        return bool(flags & d.keys())

    os.environ["IN_TEST"] = "1"
    os.environ["MINI_INFER_WRITE_FIGURES"] = "1"          # chapters redraw their committed figures only here
    shell = CaptureShell(fn)
    cwd = os.getcwd()
    os.chdir(fn.parent)
    try:
        shell.run_all(nb, exc_stop=True, preproc=skip)
    except Exception:
        sys.stderr.write(shell.prettytb(fname=fn) + "\n")
        raise SystemExit(1)
    finally:
        os.chdir(cwd)
    write_nb(nb, fn)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("nbs", nargs="+")
    ap.add_argument("--force", nargs="*", default=[])
    a = ap.parse_args()
    sys.path.insert(0, str(Path.cwd()))
    for f in a.nbs:
        print("running", f, flush=True)
        run(Path(f).resolve(), set(a.force))
