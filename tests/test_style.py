"""The package's code keeps STYLE.md's rules that a tool can check: lines of at most 100 characters (what
nbdev generates itself, the module docstring and `__all__`, aside) and no method attached by assignment."""
import ast
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from wrap_lines import LIMIT, package_long_lines  # noqa: E402


def test_exported_lines_fit_the_limit(monkeypatch):
    "`python tools/wrap_lines.py nbs/X.ipynb` rewraps a chapter's exported cells when this fails."
    monkeypatch.chdir(ROOT)
    long = package_long_lines()
    assert not long, f"{len(long)} lines over {LIMIT} characters, e.g. {long[:3]}"


def test_no_method_is_attached_by_assignment():
    "No `Class.name = function` in mini_infer/: a class is explained across cells with fastcore's @patch."
    hits = []
    for p in sorted((ROOT / "mini_infer").rglob("*.py")):
        tree = ast.parse(p.read_text())
        classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        funcs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in tree.body:
            if not isinstance(node, ast.Assign): continue
            for t in node.targets:
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in classes
                        and isinstance(node.value, ast.Name) and node.value.id in funcs):
                    hits.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not hits, hits
