"""The book: every notebook is in the table of contents, it builds offline with warnings as errors, headless
Chromium sees MathJax (the vendored copy) typeset its equations, and nbdev's hidden cells stay hidden."""
import html
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MATHJAX = ROOT / "book" / "static" / "mathjax"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


nbdev_book = _load("nbdev_book", ROOT / "book" / "_ext" / "nbdev_book.py")
make_readme = _load("make_readme", ROOT / "tools" / "make_readme.py")


def toc_entries() -> list[str]:
    "Every `root`/`file` of _toc.yml, in reading order."
    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    yield node[key]
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
    return list(walk(yaml.safe_load((ROOT / "_toc.yml").read_text())))


def source_of(entry: str) -> Path:
    "The file behind a toc entry (`nbs/00_testing` -> nbs/00_testing.ipynb or .md)."
    found = [p for p in (ROOT / f"{entry}.ipynb", ROOT / f"{entry}.md") if p.exists()]
    assert len(found) == 1, f"_toc.yml entry {entry!r} should match exactly one .ipynb or .md file, found {found}"
    return found[0]


# ---------------------------------------------------------------- table of contents (no build needed)

def test_every_notebook_is_in_toc():
    listed = set(toc_entries())
    missing = sorted(f"nbs/{p.stem}" for p in (ROOT / "nbs").glob("*.ipynb") if f"nbs/{p.stem}" not in listed)
    assert not missing, f"add these notebooks to _toc.yml under their part (see its header): {missing}"


def test_toc_entries_exist_once():
    entries = toc_entries()
    assert entries[0] == "nbs/index", "the landing page nbs/index must be the toc root"
    assert len(entries) == len(set(entries)), "a file is listed twice in _toc.yml"
    for entry in entries:
        source_of(entry)


def test_index_is_not_a_module():
    nb = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    assert not any("default_exp" in c.source for c in nb.cells if c.cell_type == "code")


# ---------------------------------------------------------------- the nbdev directive reader (unit level)

def _cell(src, outputs=()):
    c = nbformat.v4.new_code_cell(src)
    c.outputs = [nbformat.from_dict(o) for o in outputs]
    return c


def test_directives_become_tags():
    show_doc = {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "---\n\n### f\n"}}
    plain = {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "**kept**"}}
    nb = nbformat.v4.new_notebook(cells=[
        _cell("#| default_exp testing"), _cell("#| hide\nimport sys"), _cell("#|exporti\ndef _f(): pass"),
        _cell("#| export\ndef f(): pass"), _cell("#| eval: false\nf()"), _cell("#| echo: false\nprint(1)"),
        _cell("#| output: false\nf()"), _cell("import sys\nif 'google.colab' in sys.modules: pass"),
        _cell("show_doc(f)", [show_doc, plain]), _cell("x = 1\n#| hide\n"),
        nbformat.v4.new_raw_cell("---\nskip_exec: true\n---")])
    nbdev_book.apply_nbdev_directives(nb)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags[:8] == [["remove-cell"], ["remove-cell"], ["remove-cell"], [], ["skip-execution"],
                        ["remove-input"], ["remove-output"], ["remove-cell"]]
    assert nb.cells[3].source == "def f(): pass" and nb.cells[4].source == "f()"
    assert [o.data["text/markdown"] for o in nb.cells[8].outputs] == ["**kept**"], "show_doc output not dropped"
    assert tags[9] == [] and "#| hide" in nb.cells[9].source, "only leading `#|` lines are directives"
    assert len(nb.cells) == 10, "the raw frontmatter cell must be dropped"


def test_split_directives_values():
    d, body = nbdev_book.split_directives("\n#| eval:false\n#| default_exp layers.basic\n\nimport torch\n")
    assert d == {"eval": "false", "default_exp": "layers.basic"} and body == "import torch\n"
    assert nbdev_book.split_directives("print(1)") == ({}, "print(1)")


def test_readme_rendering():
    assert make_readme.render_markdown("see {cite:t}`a2020b`") == "see [a2020b](papers/a2020b.md)"
    assert make_readme.render_markdown("{cite:p}`a, b`") == "([a](papers/a.md), [b](papers/b.md))"
    assert make_readme.render_code("#| hide\nimport os") is None
    assert make_readme.render_code("#| export\nx = 1") == "```python\nx = 1\n```"
    text = make_readme.render(ROOT / "nbs" / "index.ipynb")
    assert text.startswith(make_readme.HEADER + "\n") and "{cite:" not in text


# ---------------------------------------------------------------- the built book

@pytest.fixture(scope="session")
def book_html(tmp_path_factory) -> Path:
    "Build the book once per pytest session into a temporary folder, warnings as errors, no --keep-going."
    out = tmp_path_factory.mktemp("book")
    cmd = [str(BIN / "jupyter-book"), "build", str(ROOT), "-W", "--path-output", str(out)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"jupyter-book build failed:\n{r.stdout[-8000:]}\n{r.stderr[-4000:]}"
    return out / "_build" / "html"


def page(book_html: Path, entry: str) -> Path:
    p = book_html / f"{entry}.html"
    assert p.exists(), f"{entry} was not built"
    return p


def math_entry() -> str:
    "The first page in reading order whose source has display math with an equation tag."
    for entry in toc_entries():
        if re.search(r"\$\$[^$]*\\tag\{", source_of(entry).read_text()):
            return entry
    pytest.fail("no page of the book has `$$ ... \\tag{..} $$` display math to check MathJax on")


class _CellInputs(HTMLParser):
    "Collect the text inside every `div.cell_input` (the displayed source of code cells)."
    def __init__(self):
        super().__init__()
        self.depth, self.inputs = 0, []

    def handle_starttag(self, tag, attrs):
        if tag != "div":
            return
        if self.depth:
            self.depth += 1
        elif "cell_input" in (dict(attrs).get("class") or "").split():
            self.depth = 1
            self.inputs.append("")

    def handle_endtag(self, tag):
        if tag == "div" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.inputs[-1] += data


def test_hidden_cells_are_hidden(book_html):
    chapters = [e for e in toc_entries() if source_of(e).suffix == ".ipynb"]
    for entry in chapters:
        text = page(book_html, entry).read_text()
        assert "google.colab" not in text, f"{entry}: the Colab install cell is shown"
        parser = _CellInputs()
        parser.feed(text)
        for src in parser.inputs:
            assert not re.search(r"^\s*#\s*\|", src, re.M), f"{entry}: a `#|` directive is shown:\n{src[:300]}"
            assert "default_exp" not in src, f"{entry}: the default_exp cell is shown"
    parser = _CellInputs()
    parser.feed(page(book_html, "nbs/00_testing").read_text())
    assert any("def test_bits" in s for s in parser.inputs), "exported cells must stay visible"


def test_mathjax_is_vendored(book_html):
    assert (book_html / "_static" / "mathjax" / "es5" / "tex-chtml.js").exists()
    assert list((book_html / "_static" / "mathjax" / "es5" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    size = sum(p.stat().st_size for p in MATHJAX.rglob("*") if p.is_file())
    assert size < 3_000_000, f"vendored MathJax is {size / 1e6:.1f} MB; keep it under 3 MB"
    for entry in toc_entries():
        text = page(book_html, entry).read_text()
        assert "cdn.jsdelivr" not in text, f"{entry} loads something from a CDN"
        scripts = re.findall(r'<script[^>]+src="([^"]*mathjax[^"]*)"', text, re.I)
        assert all("_static/mathjax/es5/tex-chtml.js" in s for s in scripts), f"{entry}: {scripts}"
        assert len(scripts) == (1 if entry == math_entry() else len(scripts)) <= 1, f"{entry}: {scripts}"


# ---------------------------------------------------------------- rendering in headless Chromium

@pytest.fixture(scope="session")
def chromium() -> str:
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed, so the rendered book is not checked in a browser (MathJax "
                    "typesetting, a real screenshot): apt-get install chromium to run these tests")
    return exe


def run_chromium(exe: str, tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000", *args, url]
    return subprocess.run(cmd, capture_output=True, timeout=180, cwd=tmp_path)


def visible_text(dom: str) -> str:
    dom = re.sub(r"<(script|style|mjx-assistive-mml)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", dom))


def test_mathjax_renders(book_html, chromium, tmp_path):
    entry = math_entry()
    r = run_chromium(chromium, tmp_path, page(book_html, entry).as_uri(), "--dump-dom")
    dom = r.stdout.decode("utf-8", "replace")
    assert r.returncode == 0 and "</html>" in dom, f"chromium failed: {r.stderr.decode()[-2000:]}"
    assert re.search(r'<mjx-container[^>]*display="true"', dom), f"{entry}: MathJax typeset no display equation"
    assert "<mjx-labels" in dom or "mjx-mlabeledtr" in dom, f"{entry}: the \\tag{{}} label was not typeset"
    text = visible_text(dom)
    for raw in ("\\tag{", "$$", "\\frac"):
        assert raw not in text, f"{entry}: raw TeX {raw!r} left in the visible text"


def png_pixels(data: bytes) -> tuple[int, int, int, bytes]:
    "Decode an 8-bit RGB/RGBA non-interlaced PNG with zlib and struct: width, height, channels, pixel bytes."
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, chunks = 8, {}
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunks.setdefault(kind, []).append(data[pos + 8:pos + 8 + n])
        pos += 12 + n
    w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {depth=} {color=}"
    ch = 3 if color == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks[b"IDAT"])), w * ch
    assert len(raw) == h * (stride + 1), "truncated PNG data"
    out, prev = bytearray(), bytearray(stride)
    for y in range(h):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1: row[i] = (row[i] + a) & 255
            elif f == 2: row[i] = (row[i] + b) & 255
            elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += row
        prev = row
    return w, h, ch, bytes(out)


def test_png_decoder_rejects_garbage():
    with pytest.raises(AssertionError, match="not a PNG"):
        png_pixels(b"GIF89a" + bytes(32))


def test_screenshot_is_a_real_page(book_html, chromium, tmp_path):
    shot = tmp_path / "page.png"
    r = run_chromium(chromium, tmp_path, page(book_html, math_entry()).as_uri(), f"--screenshot={shot}",
                     "--window-size=800,600", "--hide-scrollbars")
    assert r.returncode == 0 and shot.exists(), f"no screenshot: {r.stderr.decode()[-2000:]}"
    w, h, ch, px = png_pixels(shot.read_bytes())
    assert (w, h) == (800, 600)
    sample = Counter(px[i:i + 3] for i in range(0, len(px), ch * 7))
    background, n_background = sample.most_common(1)[0]
    ink = 1 - n_background / sum(sample.values())
    assert len(sample) > 16 and ink > 0.02, f"blank screenshot: {len(sample)} colours, {ink:.1%} non-background"
