"""Package metadata a PyPI upload checks (valid trove classifiers, the license file in the sdist and the wheel), and
no code path that unpickles."""
import subprocess
import sys

from conftest import ROOT

DEVELOPMENT_STATUS = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable",
                      "6 - Mature", "7 - Inactive"]                   # the trove classifiers, as PyPI lists them


def setup_py(*args: str, cwd=ROOT) -> str:
    r = subprocess.run([sys.executable, str(ROOT / "setup.py"), *args], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_development_status_is_a_trove_classifier():
    status = [c for c in setup_py("--classifiers").splitlines() if c.startswith("Development Status :: ")]
    assert len(status) == 1 and status[0].removeprefix("Development Status :: ") in DEVELOPMENT_STATUS, status


def test_license_file_is_declared_and_shipped(tmp_path):
    "LICENSE is the Apache-2.0 text, declared in the metadata (so wheels carry it) and listed for the sdist."
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    setup_py("-q", "egg_info", "--egg-base", str(tmp_path))
    info = next(tmp_path.glob("*.egg-info"))
    assert "License-File: LICENSE" in (info / "PKG-INFO").read_text()
    sources = (info / "SOURCES.txt").read_text().split()
    assert {"LICENSE", "settings.ini", "README.md"} <= set(sources), sources   # the sdist builds a wheel


def test_no_code_path_unpickles():
    "Weights come from safetensors or GGUF; nothing in the package may unpickle (README, Security)."
    import re
    pkg = ROOT / "mini_infer"
    hits = [f"{p.name}:{i}" for p in pkg.rglob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\bpickle\b|torch\.load\(|\bnp\.load\(.*allow_pickle=True", line)]
    assert not hits, hits
