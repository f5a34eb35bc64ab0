"""Sphinx extension for the mini_infer book: honour nbdev `#|` cell directives when myst-nb reads a notebook.

Hook: myst-nb's `nb_custom_formats`. `myst_nb.core.read.create_nb_reader` looks the reader up by file suffix in
`nb_custom_formats` and only then adds its own `.ipynb` reader with `setdefault`, so an `.ipynb` entry there
replaces the reader for every notebook. The reader receives the file's text and returns the NotebookNode that
myst-nb renders (and would execute), so the cell tags set here act exactly as if they were saved in the file.
The alternatives are worse: no Sphinx event runs between myst-nb reading a notebook and rendering it, and a
`source-read` handler would have to parse and re-serialise the JSON text itself.

Mapping (nbdev directive -> myst-nb cell tag):
  hide, default_exp, exporti, include: false  -> remove-cell      (nothing shown)
  eval: false                                 -> skip-execution   (shown, never run)
  echo: false, hide_input                     -> remove-input     (output only)
  output: false, hide_output                  -> remove-output    (source only)
The `#| ...` lines are stripped from every displayed source, the Colab install cell is removed, and nbdev
`show_doc` markdown outputs (they start with `---`, which docutils reads as a transition and fails on) and raw
frontmatter cells (`---` YAML `---`, e.g. `skip_exec: true`) are dropped.
"""
import re

import nbformat

_DIRECTIVE = re.compile(r"^\s*#\s*\|\s*(.*?)\s*$")
_KEY_VALUE = re.compile(r"^([A-Za-z_][\w-]*)\s*:?\s*(.*)$")
_REMOVE_CELL = {"hide", "default_exp", "exporti"}
_TAG_IF_FALSE = {"eval": "skip-execution", "echo": "remove-input", "output": "remove-output", "include": "remove-cell"}
_TAG_IF_SET = {"hide_input": "remove-input", "hide_output": "remove-output"}
_COLAB_MARK = "google.colab"


def split_directives(source: str) -> tuple[dict, str]:
    "Leading `#| key: value` lines of a code cell as a dict, and the source without them (nbdev's rule)."
    lines = source.splitlines(keepends=True)
    directives, i = {}, 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if m is None and lines[i].strip():
            break
        if m is not None:
            kv = _KEY_VALUE.match(m.group(1))
            if kv is not None:
                directives[kv.group(1)] = kv.group(2).strip()
        i += 1
    return directives, "".join(lines[i:])


def cell_tags(directives: dict, source: str) -> set:
    "The myst-nb tags that a code cell's nbdev directives ask for."
    tags = {"remove-cell"} if _REMOVE_CELL & directives.keys() else set()
    for key, tag in _TAG_IF_FALSE.items():
        if directives.get(key, "").lower() == "false":
            tags.add(tag)
    tags.update(tag for key, tag in _TAG_IF_SET.items() if key in directives)
    if _COLAB_MARK in source:
        tags.add("remove-cell")
    return tags


def _is_show_doc(output) -> bool:
    md = output.get("data", {}).get("text/markdown")
    if isinstance(md, list):
        md = "".join(md)
    return isinstance(md, str) and md.lstrip().startswith("---")


def apply_nbdev_directives(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    "Tag, strip and filter the code cells of `nb` in place according to their nbdev directives."
    nb.cells = [c for c in nb.cells if not (c.cell_type == "raw" and c.source.lstrip().startswith("---"))]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        directives, body = split_directives(cell.source)
        tags = cell_tags(directives, cell.source)
        meta_tags = cell.metadata.setdefault("tags", [])
        meta_tags.extend(sorted(tags - set(meta_tags)))
        cell.source = body.rstrip("\n")
        cell.outputs = [o for o in cell.get("outputs", []) if not _is_show_doc(o)]
    return nb


def read_nbdev_notebook(text: str) -> nbformat.NotebookNode:
    "myst-nb reader for `.ipynb` files: nbformat's reader followed by `apply_nbdev_directives`."
    return apply_nbdev_directives(nbformat.reads(text, as_version=4))


def _register_reader(app, config):
    formats = dict(config.nb_custom_formats or {})
    formats.setdefault(".ipynb", ["nbdev_book.read_nbdev_notebook", {}, False])
    config.nb_custom_formats = formats


def setup(app):
    "Register the notebook reader before myst-nb turns `nb_custom_formats` into source suffixes."
    app.connect("config-inited", _register_reader, priority=400)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
