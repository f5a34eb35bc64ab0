"""The Makefile as a user meets it: quiet recipes, the torch index as a variable, no reinstall for a touched file."""
import os
import subprocess

import pytest

from conftest import ROOT


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


def test_recipes_are_not_echoed():
    r = make("help")
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("  make serve"), r.stdout
    assert "sed " not in r.stdout + r.stderr                      # the recipe's own command is not printed


def test_torch_index_comes_from_a_variable():
    "Issue 13.9: TORCH_INDEX_URL picks the index for torch; empty by default (pip's own configuration)."
    default = make("-n", "-B", "install").stdout
    chosen = make("-n", "-B", "install", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu").stdout
    torch_line = lambda out: next(line for line in out.splitlines() if "torch==" in line)
    assert "--index-url" not in torch_line(default)
    assert torch_line(chosen).endswith("torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    readme = (ROOT / "README.md").read_text()
    assert "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in readme and "CUDA build" in readme


def test_a_rewritten_but_unchanged_file_does_not_reinstall():
    "Issue 13.12: nbdev_export no longer rewrites pyproject.toml, and the install stamp follows contents, not times."
    from nbdev.config import get_config
    assert not get_config().get("update_pyproject", True)        # settings.ini: update_pyproject = False
    if make("-q", "install").returncode != 0:
        pytest.skip("this .venv was not installed by `make install` (or its inputs changed since)")
    for name in ("pyproject.toml", "settings.ini", "setup.py"):
        os.utime(ROOT / name)                                      # as a tool that rewrites it unchanged
    assert make("-q", "install").returncode == 0
