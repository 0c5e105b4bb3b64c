"""The walls between the layers (design.md: kit, tracks, machinery), read from the source with `ast`.

Every import counts: at module level, inside functions, and `importlib.import_module("cudabook....")` with a
literal name. (a) no cycle among cudabook's modules; (b) no track package imports another track; (c) nothing
outside the track packages imports one, except the registry (cudabook/track.py) and the CLI (__main__.py);
(d) the kit imports neither a track nor the machinery, and a track imports no machinery: only the kit.

The machinery is MACHINERY below; everything else outside the track packages is the kit. One edge the scan does
not see, on purpose: a track's bound helpers (`gemm.grade`, `gemm.sweep`: cudabook.kit.ladder.face) look up
cudabook.labs and cudabook.lesson by name when a lesson calls them, so that a lesson need not pass track=.
"""
from __future__ import annotations

import ast
import pathlib


import cudabook
from cudabook import track

PACKAGE = pathlib.Path(cudabook.__file__).resolve().parent
ALLOWED_TO_NAME_TRACKS = {"cudabook.track", "cudabook.__main__"}
MACHINERY = {"cudabook.track", "cudabook.check", "cudabook.labs", "cudabook.results", "cudabook.lesson",
             "cudabook.sizes", "cudabook.notebooks", "cudabook.workbook", "cudabook.__main__", "cudabook.profile",
             "cudabook.timeline", "cudabook.edits"}


def _modules() -> dict[str, pathlib.Path]:
    """Module name -> file, for every .py under cudabook/ (a package is named by its __init__.py)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, pathlib.Path()).name == "__init__.py"


def _resolve(target: str) -> str | None:
    """The cudabook module that importing `target` loads last: itself, or the nearest package above it."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def imports_of(name: str) -> dict[str, int]:
    """The cudabook modules `name` imports (anywhere in its file), each with the line of the first import."""
    tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target, line):
        module = _resolve(target)
        if module and module != name:
            found.setdefault(module, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("cudabook"):
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if not base.startswith("cudabook"):
                continue
            for alias in node.names:           # `from pkg import sub` imports the submodule, else pkg itself
                add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base, node.lineno)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and node.args[0].value.startswith("cudabook")
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) == "import_module")):
            add(node.args[0].value, node.lineno)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}
TRACK_PACKAGES = {f"cudabook.{t}" for t in track.TRACKS}


def track_of(module: str) -> str | None:
    return next((t for t in TRACK_PACKAGES if module == t or module.startswith(t + ".")), None)


def _cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_function_level_and_importlib_imports():
    assert "cudabook.device" in GRAPH["cudabook"]                      # from . import device
    assert "cudabook.emulate" in GRAPH["cudabook.labs"]                # inside a function
    assert GRAPH["cudabook.check"].keys() >= {"cudabook", "cudabook.emulate"}   # from . import SIMULATOR, emulate


def test_no_import_cycle():
    cycles = _cycles()
    lines = [" -> ".join(c) + "\n    " + "; ".join(f"{a} imports {b} (line {GRAPH[a][b]})"
                                                  for a in c for b in GRAPH[a] if b in c) for c in cycles]
    assert not cycles, "import cycles among cudabook's modules (function-level imports count):\n" + "\n".join(lines)


def test_no_track_imports_another_track():
    crossing = [f"{m} imports {t} (line {line})" for m, targets in GRAPH.items() if track_of(m)
                for t, line in targets.items() if track_of(t) and track_of(t) != track_of(m)]
    assert not crossing, "\n".join(crossing)


def test_only_the_registry_and_the_cli_import_a_track():
    upward = [f"{m} imports {t} (line {line})" for m, targets in GRAPH.items()
              if not track_of(m) and m not in ALLOWED_TO_NAME_TRACKS
              for t, line in targets.items() if track_of(t)]
    assert not upward, "\n".join(upward)


def layer(module: str) -> str:
    if track_of(module):
        return "track"
    if module in MACHINERY or any(module.startswith(m + ".") for m in MACHINERY):
        return "machinery"
    return "kit"


def test_the_kit_imports_no_track_and_no_machinery_and_a_track_no_machinery():
    upward = [f"{layer(m)} {m} imports {layer(t)} {t} (line {line})" for m, targets in GRAPH.items()
              for t, line in targets.items()
              if (layer(m), layer(t)) in {("kit", "track"), ("kit", "machinery"), ("track", "machinery")}]
    assert not upward, "\n".join(upward)


def test_the_layers_are_what_the_readme_draws():
    assert layer("cudabook.kit.rung") == layer("cudabook.nvrtc") == layer("cudabook.emulate") == "kit"
    assert layer("cudabook.gemm.s05_wgmma_tma") == "track" and layer("cudabook.profile.cli") == "machinery"
