"""Render nbs/index.ipynb into README.md (standard library only, so it runs before the venv exists).

Markdown cells are copied (MyST citation roles become links to papers/<key>.md); code cells become fenced
python blocks, except hidden ones (`#| hide`, `#| default_exp`, `#| exporti`, the Colab install cell), and
their `#|` directive lines are dropped. Outputs are not rendered.

Usage: python tools/make_readme.py            write README.md
       python tools/make_readme.py --check    exit 1 if README.md differs from what would be written
"""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = "<!-- generated from nbs/index.ipynb by tools/make_readme.py: do not edit -->"
_DIRECTIVE = re.compile(r"^\s*#\s*\|\s*([A-Za-z_][\w-]*)")
_HIDDEN = {"hide", "default_exp", "exporti"}
_CITE = re.compile(r"\{cite:([tp])\}`([^`]+)`")
_ROLE = re.compile(r"\{[\w:.-]+\}`([^`]+)`")


def _cite(m: re.Match) -> str:
    links = ", ".join(f"[{k.strip()}](papers/{k.strip()}.md)" for k in m.group(2).split(","))
    return links if m.group(1) == "t" else f"({links})"


def render_markdown(src: str) -> str:
    "MyST markdown to GitHub markdown: citations become links to the paper notes, other roles plain code."
    return _ROLE.sub(r"`\1`", _CITE.sub(_cite, src))


def render_code(src: str) -> str | None:
    "A fenced python block without the leading `#|` lines, or None for a hidden cell."
    lines = src.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip() and not _DIRECTIVE.match(line)), len(lines))
    keys = {_DIRECTIVE.match(line).group(1) for line in lines[:first] if _DIRECTIVE.match(line)}
    body = "\n".join(lines[first:]).strip("\n")
    if keys & _HIDDEN or "google.colab" in src or not body:
        return None
    return f"```python\n{body}\n```"


def render(nb_path: Path) -> str:
    "The README text for the notebook at `nb_path`."
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    parts = [HEADER]
    for cell in nb["cells"]:
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            parts.append(render_markdown(src).strip("\n"))
        elif cell["cell_type"] == "code" and (code := render_code(src)) is not None:
            parts.append(code)
    return "\n\n".join(parts) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is not up to date")
    ap.add_argument("--nb", type=Path, default=ROOT / "nbs" / "index.ipynb")
    ap.add_argument("--out", type=Path, default=ROOT / "README.md")
    args = ap.parse_args()
    text = render(args.nb)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out.name} is out of date with {args.nb.name}: run `make readme` "
                  "(python tools/make_readme.py) and commit the result", file=sys.stderr)
            return 1
        print(f"{args.out.name} is up to date")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
