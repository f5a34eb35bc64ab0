#!/usr/bin/env python
"""Keep exported code within 100 characters a line (STYLE.md), in the notebooks that are its source.

    python tools/wrap_lines.py --check            # list every line of mini_infer/ over the limit; exit 1 if any
    python tools/wrap_lines.py nbs/22_*.ipynb      # rewrite those notebooks' exported cells in place

A rewrite touches only the statements that hold a long line, in three ways: a trailing comment moves onto its
own line above the code (wrapped), a one-line docstring becomes a wrapped triple-quoted one, and a long
statement is laid out by `black` (that statement alone, so the rest of the cell keeps its hand layout). Each
rewritten cell is checked to compile to the same syntax tree (docstring whitespace aside) as before, so the
rewrite cannot change behaviour; what cannot be wrapped this way is listed for a hand edit."""
import argparse, ast, io, json, re, sys, textwrap, tokenize
from pathlib import Path

LIMIT = 100
EXPORT = re.compile(r"^#\|\s*export")


def _long(lines): return [i for i, l in enumerate(lines) if len(l) > LIMIT]


def _indent(line): return line[:len(line) - len(line.lstrip())]


def _wrap_comment(text, indent):
    "A comment's text as `# ` lines of at most LIMIT characters at `indent`."
    body = text.lstrip("#").strip()
    width = max(LIMIT - len(indent) - 2, 40)
    return [f"{indent}# {part}" for part in textwrap.wrap(body, width, break_on_hyphens=False)] or [indent + "#"]


def _comments(src):
    """Comments on long lines: a run of aligned trailing comments moves left together if that is enough,
    else a long line's trailing comment goes onto its own lines above the code; long full-line comments wrap."""
    lines = src.split("\n")
    long = set(_long(lines))
    if not long: return src
    try: toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError): return src
    trailing, out = {}, {}
    for t in toks:
        i = t.start[0] - 1
        if t.type != tokenize.COMMENT or t.string.startswith("#|"): continue
        code = lines[i][:t.start[1]].rstrip()
        if code: trailing[i] = (t.start[1], code, t.string)
        elif i in long: out[i] = _wrap_comment(t.string, _indent(lines[i]))
    runs, run = [], []
    for i in sorted(trailing):                                       # runs of adjacent lines aligned alike
        if run and (i != run[-1] + 1 or trailing[i][0] != trailing[run[-1]][0]): runs.append(run); run = []
        run.append(i)
    if run: runs.append(run)
    for run in runs:
        if not long.intersection(run): continue
        col = min(LIMIT - len(trailing[i][2]) for i in run)
        if col >= max(len(trailing[i][1]) for i in run) + 2:
            for i in run: out[i] = [trailing[i][1].ljust(col) + trailing[i][2]]
            continue
        for i in long.intersection(run):
            if i > 0 and lines[i - 1].rstrip().endswith("\\"): continue      # a backslash continuation
            _, code, text = trailing[i]
            out[i] = _wrap_comment(text, _indent(lines[i])) + [code]
    for i in sorted(out, reverse=True): lines[i:i + 1] = out[i]
    return "\n".join(lines)


def _docstrings(src):
    "Long one-line docstrings as wrapped triple-quoted ones."
    lines = src.split("\n")
    long = set(_long(lines))
    if not long: return src
    try: tree = ast.parse(src)
    except SyntaxError: return src
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body: continue
        d = node.body[0]
        if not (isinstance(d, ast.Expr) and isinstance(d.value, ast.Constant) and isinstance(d.value.value, str)): continue
        if d.lineno != d.end_lineno or d.lineno - 1 not in long: continue
        text = d.value.value
        if "\\" in text or '"""' in text or "\n" in text or text.endswith('"'): continue
        line = lines[d.lineno - 1]
        if line[d.end_col_offset:].strip(): continue                                 # code after the docstring
        indent = line[:d.col_offset]
        parts = textwrap.wrap(text, LIMIT - len(indent) - 3, break_on_hyphens=False)
        new = [f'{indent}"""{parts[0]}'] + [indent + p for p in parts[1:]]
        new[-1] += '"""'
        edits.append((d.lineno - 1, new))
    for i, new in sorted(edits, reverse=True): lines[i:i + 1] = new
    return "\n".join(lines)


def _innermost(tree, lineno):
    "The smallest statement whose lines hold `lineno`, and whether `lineno` is in a compound statement's header."
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= lineno <= node.end_lineno:
            if best is None or (node.end_lineno - node.lineno) <= (best.end_lineno - best.lineno): best = node
    return best


def _black(seg, width):
    import black                                      # an authoring dependency: pip install black==24.10.0
    mode = black.Mode(line_length=width, string_normalization=False, magic_trailing_comma=False)
    return black.format_str(seg, mode=mode).rstrip("\n").split("\n")


def _statements(src):
    "Each long statement laid out by black, alone; a compound statement's long header likewise."
    lines = src.split("\n")
    for _ in range(200):
        try: tree = ast.parse(src)
        except SyntaxError: return src
        todo = [i for i in _long(lines) if not lines[i].lstrip().startswith("#")]
        done = False
        for i in todo:
            node = _innermost(tree, i + 1)
            if node is None: continue
            body = getattr(node, "body", None)
            a, b, tail = node.lineno - 1, node.end_lineno, None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
                a = node.decorator_list[0].lineno - 1
            if body and isinstance(body, list) and body[0].lineno > node.lineno and i + 1 < body[0].lineno:
                b, tail = body[0].lineno - 1, "pass"                   # format the header with a stand-in body
                while b > a + 1 and (not lines[b - 1].strip() or lines[b - 1].lstrip().startswith("#")): b -= 1
            indent = _indent(lines[a])
            seg = lines[a:b]
            if any(l.strip() and not l.startswith(indent) for l in seg): continue
            text = "\n".join(l[len(indent):] for l in seg)
            if tail: text += "\n    pass"
            try: new = _black(text, LIMIT - len(indent))
            except Exception: continue
            if tail:
                if new[-1].strip() != "pass": continue
                new = new[:-1]
            new = [(indent + l) if l.strip() else "" for l in new]
            if new == seg: continue
            lines[a:b] = new
            src = "\n".join(lines)
            done = True
            break
        if not done: return src
    return src


OPEN, CLOSE = "([{", ")]}"
BREAK_BEFORE = {"and", "or", "if", "else", "for", "+", "-", "*", "|"}


def _split_string(tok, room):
    "A one-line string literal cut at a space so its first part fits `room` columns: (head, tail) or None."
    s = tok.string
    m = re.match(r"(?i)([rbuf]*)(['\"])", s)
    if not m or s[len(m.group(0)):].startswith(m.group(2) * 2): return None        # triple-quoted or empty
    prefix, q = m.group(1), m.group(2)
    body = s[len(m.group(0)):-1]
    for cut in range(min(room - len(prefix) - 2, len(body) - 1), 8, -1):
        if body[cut - 1] != " ": continue
        head = body[:cut]
        if "f" in prefix.lower() and (head.count("{") != head.count("}")): continue
        if head.endswith("\\") or "\\" in head[-2:]: continue
        plain = lambda part: prefix.replace("f", "").replace("F", "") if "{" not in part else prefix
        return f"{plain(head)}{q}{head}{q}", f"{plain(body[cut:])}{q}{body[cut:]}{q}"
    return None


def _hang_line(src, i):
    """Break long line `i` inside its brackets, the continuation aligned after the open bracket: at the
    outermost bracket that allows it, rightmost first; a string literal is cut only where nothing else can be."""
    lines = src.split("\n")
    try: toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError): return None
    stack, cands = [], []                       # open brackets: the column a continuation aligns to
    indent = len(_indent(lines[i]))
    line = lines[i]
    for k, t in enumerate(toks):
        row = t.start[0] - 1
        if row > i: break
        if t.type == tokenize.OP and t.string in OPEN:
            stack.append(t.end[1] if row == i else indent)
            continue
        if t.type == tokenize.OP and t.string in CLOSE:
            if stack: stack.pop()
            continue
        if row != i or not stack: continue
        col, depth = stack[-1], len(stack)
        if col > LIMIT - 30: continue
        if t.type == tokenize.OP and t.string == "," and t.end[1] <= LIMIT:
            nxt = toks[k + 1] if k + 1 < len(toks) else None
            if nxt is not None and nxt.start[0] - 1 == i and nxt.string not in CLOSE:
                cands.append(((depth, 0, -t.end[1]), [line[:t.end[1]].rstrip(), " " * col + line[t.end[1]:].lstrip()]))
        elif t.string in BREAK_BEFORE and t.start[1] <= LIMIT and t.start[1] > col + 8:
            prev = toks[k - 1]
            if prev.start[0] - 1 == i and prev.string not in OPEN and not (t.string in "+-*" and
                    prev.type == tokenize.OP and prev.string not in CLOSE):
                cands.append(((depth, 0, -t.start[1]), [line[:t.start[1]].rstrip(), " " * col + line[t.start[1]:]]))
        elif t.type == tokenize.STRING and t.start[0] == t.end[0] and t.end[1] > LIMIT and t.start[1] < LIMIT - 20:
            cut = _split_string(t, LIMIT - t.start[1])
            if cut:
                head, tail = cut
                cands.append(((depth, 1, 0), [line[:t.start[1]] + head, " " * col + tail + line[t.end[1]:]]))
    if not cands: return None
    lines[i:i + 1] = min(cands, key=lambda c: c[0])[1]
    return "\n".join(lines)


def _parenthesize(src, i):
    "Line `i` with the expression of its statement (value, test or iterable) put in parentheses, or None."
    try: tree = ast.parse(src)
    except SyntaxError: return None
    node = _innermost(tree, i + 1)
    expr = getattr(node, "value", None) or getattr(node, "test", None) or getattr(node, "iter", None)
    if not isinstance(expr, ast.expr) or expr.lineno != i + 1 or expr.end_lineno != i + 1: return None
    if isinstance(expr, (ast.Call, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.Subscript)):
        return None                                                     # it has brackets of its own
    lines = src.split("\n")
    line, a, b = lines[i], expr.col_offset, expr.end_col_offset
    if line[a:a + 1] == "(" and line[b - 1:b] == ")": return None
    lines[i] = line[:a] + "(" + line[a:b] + ")" + line[b:]
    return "\n".join(lines)


def _hang(src):
    "Long code lines broken inside their brackets, as the book's code is written by hand."
    for _ in range(200):
        lines = src.split("\n")
        todo = [i for i in _long(lines) if not lines[i].lstrip().startswith("#")]
        for i in todo:
            wrapped = _parenthesize(src, i)                  # an outer bracket, where the statement lacks one
            new = (_hang_line(wrapped, i) if wrapped is not None else None) or _hang_line(src, i)
            if new is not None:
                src = new
                break
        else: return src
    return src


class _Docs(ast.NodeTransformer):
    "Docstring whitespace does not count when two trees are compared."
    def generic_visit(self, node):
        super().generic_visit(node)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = " ".join(body[0].value.value.split())
        return node


def _tree(src): return ast.dump(_Docs().visit(ast.parse(src)))


def rewrite(src):
    "One exported cell's source with its long lines wrapped, or the source unchanged if the tree would change."
    new = _statements(_hang(_docstrings(_comments(src))))
    try: same = _tree(new) == _tree(src)
    except SyntaxError: same = False
    return new if same else src


def exported_cells(nb):
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and EXPORT.match("".join(cell["source"])): yield cell


def long_lines(path):
    nb = json.loads(Path(path).read_text())
    for n, cell in enumerate(exported_cells(nb)):
        for line in "".join(cell["source"]).split("\n"):
            if len(line) > LIMIT: yield n, line


def _generated(src):
    """Line numbers nbdev writes itself: the module docstring (the notebook's description, prose of the
    book's chapter heading) and `__all__` (the list of exported names). The rule is for code we write."""
    body, lines = ast.parse(src).body, set()
    for node in body:
        doc = node is body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        names = isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["__all__"]
        if doc or names: lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def package_long_lines(root="mini_infer"):
    """(file:line, line) for each line of the exported package over the limit (the generated index and
    the lines nbdev generates aside)."""
    out = []
    for p in sorted(Path(root).rglob("*.py")):
        if p.name == "_modidx.py": continue
        src = p.read_text()
        skip = _generated(src)
        out += [(f"{p}:{n}", line) for n, line in enumerate(src.split("\n"), 1)
                if len(line) > LIMIT and n not in skip]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("notebooks", nargs="*")
    p.add_argument("--check", action="store_true", help="list exported lines over the limit; exit 1 if any")
    args = p.parse_args()
    paths = args.notebooks or sorted(str(q) for q in Path("nbs").glob("*.ipynb"))
    if args.check:
        bad = package_long_lines()
        for where, line in bad: print(f"{where}: {len(line)} characters: {line.strip()[:60]}")
        print(f"{len(bad)} exported lines over {LIMIT} characters")
        sys.exit(1 if bad else 0)
    for path in paths:
        raw = Path(path).read_text()
        nb = json.loads(raw)
        changed = 0
        for cell in exported_cells(nb):
            src = "".join(cell["source"])
            new = rewrite(src)
            if new != src:
                cell["source"] = [l + "\n" for l in new.split("\n")[:-1]] + [new.split("\n")[-1]]
                changed += 1
        if changed:
            Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        left = list(long_lines(path))
        print(f"{path}: {changed} cells rewritten, {len(left)} long lines left")


if __name__ == "__main__": main()
