"""Notebooks are built from plain-text sources, and labs from solutions.

Sources live in `lessons/` in the "percent" format (`# %%` starts a code cell, `# %% [markdown]` a text cell
whose lines start with `# `). Two kinds of source:

    lessons/<track>/NN_topic.py       -> notebooks/<track>/NN_topic.ipynb             (the lesson)
    lessons/<track>/NN_topic_lab.py   -> solutions/<track>/NN_topic_SOLUTION.ipynb    (the completed lab)
                                      -> labs/<track>/NN_topic.ipynb                  (the exercise, derived)

Each track has a folder of its own (its LESSONS, its NAME unless it says otherwise): lessons/gemm/02_smem_tiles_lab.py
-> labs/gemm/02_smem_tiles.ipynb, and so on; only the workbook's setup and map (lessons/00_*.py) sit at the top.

A code line `#! kernel <module> <function>` is replaced by that function's source, read from cudabook's own
module: each kernel is written once, in cudabook/, and every notebook shows that copy. Inside a kernel, the
part a learner writes sits between `# >>> lab: <hint>` and `# <<< lab`. Lessons and solutions keep the code
and drop the two marker lines; labs replace the region by the hint and `pass`.

CUDA C++ kernels (cudabook/**/*.cu) mark their lab region with `// >>> lab: <hint>` and `// <<< lab`. A code
line `#! region <file> <NAME>` becomes a raw string assignment `NAME = r"..."` holding the region's lines
(the solution) or, in labs, only `// TODO: <hint>`; cudabook.labs splices the learner's text back into the
file to grade it.

A markdown line `#! tracks` becomes the map of the workbook: every track, each lesson with its lab and
solution, linked from the notebook being built (the landing notebook, lessons/00_tracks.py). It is made from
the files in lessons/, so a new lesson appears there at the next build.

    python -m cudabook.notebooks build    regenerate every notebook
    python -m cudabook.notebooks check    fail if any committed notebook differs from its source
"""
from __future__ import annotations

import ast
import json
import pathlib
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ROOT / "lessons"
PACKAGE = ROOT / "cudabook"

# A lab region: `// >>> lab: <hint>` ... `// <<< lab` (or with #). A file may hold a second lab for another stage
# (GEMM 07's and 08's share clusters.cu): its region is tagged with that stage, `// >>> lab[08_fp8]: <hint>`,
# and the stage names its tag (LAB_TAG). Groups: indent, comment mark, tag (None: untagged), hint.
LAB_BEGIN = re.compile(r"^(\s*)(#|//) >>> lab(?:\[(\w+)\])?: (.*)$")
LAB_END = re.compile(r"^\s*(?:#|//) <<< lab\s*$")
DIRECTIVE = re.compile(r"^#! kernel (\S+) (\S+)\s*$")
REGION = re.compile(r"^#! region ([^\s#]+)(?:#(\w+))? ([A-Za-z_]\w*)\s*$")   # #! region <path>[#<tag>] <name>


class SourceError(ValueError):
    pass


def parse_percent(text: str) -> list[dict]:
    """Split a percent-format source into cells: [{"cell_type": ..., "source": ...}]."""
    cells, kind, lines = [], None, []

    def flush():
        if kind is not None:
            body = "\n".join(lines).strip("\n")
            if kind == "markdown":
                body = "\n".join(_unhash(line) for line in body.split("\n"))
            cells.append({"cell_type": kind, "source": body})

    for line in text.split("\n"):
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def _unhash(line: str) -> str:
    if line.startswith("# "):
        return line[2:]
    if line == "#":
        return ""
    raise SourceError(f"markdown line does not start with '# ': {line!r}")


def function_source(module: str, function: str) -> str:
    """The source of `function` (decorators included) in cudabook/<module path>.py."""
    path = PACKAGE / (module.replace(".", "/") + ".py")
    if not path.exists():
        raise SourceError(f"#! kernel {module} {function}: no file {path.relative_to(ROOT)}")
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            lines = text.split("\n")
            end = node.end_lineno
            while end < len(lines) and LAB_END.match(lines[end]):   # a closing marker is a comment: not in the AST
                end += 1
            return "\n".join(lines[first - 1:end])
    raise SourceError(f"#! kernel {module} {function}: no function {function} in {path.relative_to(ROOT)}")


def region_source(path: str, tag: str | None = None) -> str:
    """The lab region of a CUDA C++ file under cudabook/ (the one tagged `tag`, or the untagged one), its two
    marker lines included."""
    file = PACKAGE / path
    if not file.exists():
        raise SourceError(f"#! region {path}: no file {file.relative_to(ROOT)}")
    lines = file.read_text().split("\n")
    marks = [(i, LAB_BEGIN.match(line)) for i, line in enumerate(lines)]
    begin = [i for i, m in marks if m and m.group(3) == tag]
    end = [j for j, line in enumerate(lines) if LAB_END.match(line) and begin and j > begin[0]][:1]
    inner = [i for i, m in marks if m and begin and end and begin[0] < i < end[0]]
    if len(begin) != 1 or not end or inner:
        which = f"'// >>> lab[{tag}]:'" if tag else "'// >>> lab:'"
        raise SourceError(f"#! region {path}: the file needs exactly one {which} ... '// <<< lab' region")
    return "\n".join(lines[begin[0]:end[0] + 1])


def expand(code: str) -> str:
    out = []
    for line in code.split("\n"):
        m, r = DIRECTIVE.match(line), REGION.match(line)
        if m:
            out.append(function_source(*m.groups()))
        elif r:
            out.append(f'{r.group(3)} = r"""\n{textwrap.dedent(region_source(r.group(1), r.group(2)))}\n"""')
        else:
            out.append(line)
    return "\n".join(out)


TRACKS_DIRECTIVE = "#! tracks"
TOP_TITLE = "Before any track: this machine and its ceilings"   # the map's heading for lessons/00_*.py
HEADING = re.compile(r"^# # (.+)$", re.MULTILINE)


def _sources() -> list[pathlib.Path]:
    return sorted(SOURCES.glob("[0-9][0-9]_*.py")) + sorted(SOURCES.glob("*/[0-9][0-9]_*.py"))


def _title(src: pathlib.Path) -> str:
    """A lesson's title from its first heading, without the number: 'Naive: one thread per target'."""
    m = HEADING.search(src.read_text())
    return m.group(1).split(" · ", 1)[-1].strip() if m else src.stem


def track_titles() -> dict[str, str]:
    """{a track's folder under lessons/: its heading on the map}, in the registry's order: each track's LESSONS
    (its NAME unless it says otherwise) and MAP_TITLE."""
    from . import track as tracks
    titles = {}
    for name in tracks.TRACKS:
        t = tracks.get(name)
        titles[getattr(t, "LESSONS", t.NAME)] = t.MAP_TITLE
    return titles


def tracks_map(at: pathlib.Path) -> str:
    """Markdown: a table per track of its lessons, labs and solutions, linked relative to the folder `at`. A folder
    of lessons that is no track's still appears, after the tracks, under its own name; the top folder's (the
    workbook's setup) comes first."""
    import os
    titles = {".": TOP_TITLE, **track_titles()}
    rungs: dict[str, dict[str, dict]] = {}
    for src in _sources():
        if f"# {TRACKS_DIRECTIVE}" in src.read_text():
            continue                                             # the map itself
        sub = str(src.parent.relative_to(SOURCES))
        topic = src.stem[:-4] if src.stem.endswith("_lab") else src.stem
        rungs.setdefault(sub, {}).setdefault(topic, {})["lab" if src.stem.endswith("_lab") else "lesson"] = src
    order = [s for s in titles if s in rungs] + sorted(s for s in rungs if s not in titles)

    def link(text, *parts):
        return f"[{text}]({pathlib.PurePath(os.path.relpath(ROOT.joinpath(*parts), at)).as_posix()})"

    out = []
    for sub in order:
        folder = () if sub == "." else (sub,)
        out += [f"### {titles.get(sub, sub)}", "", "| | lesson | lab | solution |", "|---|---|---|---|"]
        for topic, files in sorted(rungs[sub].items()):
            lesson = (link(_title(files["lesson"]), "notebooks", *folder, f"{topic}.ipynb")
                      if "lesson" in files else "")
            lab = link(_title(files["lab"]), "labs", *folder, f"{topic}.ipynb") if "lab" in files else ""
            solution = link("solution", "solutions", *folder, f"{topic}_SOLUTION.ipynb") if "lab" in files else ""
            out.append(f"| {topic[:2]} | {lesson} | {lab} | {solution} |")
        out.append("")
    return "\n".join(out).rstrip("\n")


def expand_markdown(text: str, at: pathlib.Path) -> str:
    return "\n".join(tracks_map(at) if line.strip() == TRACKS_DIRECTIVE else line for line in text.split("\n"))


def strip_markers(code: str) -> str:
    return "\n".join(line for line in code.split("\n") if not (LAB_BEGIN.match(line) or LAB_END.match(line)))


def blank_regions(code: str) -> str:
    """The lab version: each marked region becomes its hint and `pass`."""
    out, inside = [], False
    for line in code.split("\n"):
        begin = LAB_BEGIN.match(line)
        if begin:
            indent, comment, _, hint = begin.groups()
            out += [f"{indent}# TODO: {hint}", f"{indent}pass"] if comment == "#" else [f"{indent}// TODO: {hint}"]
            inside = True
        elif LAB_END.match(line):
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise SourceError("a '# >>> lab:' region is never closed by '# <<< lab'")
    return "\n".join(out)


def lab_hints(code: str, tag: str | None = None) -> list[str]:
    """The hints of the code's lab regions tagged `tag` (None: the untagged ones)."""
    return [m.group(4) for m in map(LAB_BEGIN.match, code.split("\n")) if m and m.group(3) == tag]


def notebook(cells: list[dict]) -> dict:
    nb_cells = []
    for i, c in enumerate(cells):
        cell = {"cell_type": c["cell_type"], "id": f"cell-{i:02d}", "metadata": {}, "source": c["source"]}
        if c["cell_type"] == "code":
            cell.update(execution_count=None, outputs=[])
        nb_cells.append(cell)
    return {
        "cells": nb_cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }


def _render(cells, transform, at):
    return notebook([dict(c, source=transform(expand(c["source"]))) if c["cell_type"] == "code" else
                     dict(c, source=expand_markdown(c["source"], at)) for c in cells])


def targets() -> dict[pathlib.Path, dict]:
    """Every notebook, by path, as its source says it should be."""
    built = {}
    for src in _sources():
        cells = parse_percent(src.read_text())
        stem, sub = src.stem, src.parent.relative_to(SOURCES)     # sub: the track's folder ("." for 00_*)
        if stem.endswith("_lab"):
            topic = stem[:-4]
            built[ROOT / "solutions" / sub / f"{topic}_SOLUTION.ipynb"] = _render(
                cells, strip_markers, ROOT / "solutions" / sub)
            built[ROOT / "labs" / sub / f"{topic}.ipynb"] = _render(cells, blank_regions, ROOT / "labs" / sub)
        else:
            built[ROOT / "notebooks" / sub / f"{stem}.ipynb"] = _render(cells, strip_markers, ROOT / "notebooks" / sub)
    return {path.resolve(): nb for path, nb in built.items()}


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def build() -> list[pathlib.Path]:
    written = []
    for path, nb in targets().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = dumps(nb)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def drift() -> list[str]:
    """Notebooks that differ from their sources (or have no source, or are missing)."""
    want = targets()
    problems = [f"{p.relative_to(ROOT)}: missing (run `python -m cudabook.notebooks build`)"
                for p in want if not p.exists()]
    problems += [f"{p.relative_to(ROOT)}: differs from its source in lessons/ (edit the source, then build)"
                 for p, nb in want.items() if p.exists() and _cells(json.loads(p.read_text())) != _cells(nb)]
    for folder in ("notebooks", "labs", "solutions"):
        for p in list((ROOT / folder).glob("*.ipynb")) + list((ROOT / folder).glob("*/*.ipynb")):
            p = p.resolve()
            if p not in want:
                problems.append(f"{p.relative_to(ROOT)}: no source in lessons/")
    return problems


def _cells(nb):
    def text(src):
        return "".join(src) if isinstance(src, list) else src
    return [(c["cell_type"], text(c["source"])) for c in nb["cells"]]


def main(argv=None):
    cmd = (argv or sys.argv[1:] or ["build"])[0]
    if cmd == "build":
        for p in build():
            print("wrote", p.relative_to(ROOT))
    elif cmd == "check":
        problems = drift()
        print("\n".join(problems) or "all notebooks match their sources")
        return 1 if problems else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
