"""Edited copies of a rung's kernel (tools/kernel_edits/): ideas measured before they become settings.

An edit is a Python file with TRACK and STAGE (the rung it edits), `edit(text) -> text`, a docstring saying what
it tries, and optionally PARAMS (the settings it is meant for), `host(stage_module)` (a host change for the
edited text alone) and BASE: the last commit whose kernel the edit fits, for an edit the rung has adopted since
or one written for the rung before it changed, so that its reading can be taken again (against the kernel at
BASE; ADOPTED = False marks one pinned there that the rung never took). tools/probe_kernel_edit.py times one
against its rung on a GPU; a lesson may compile one to show what the compiler made of it.
"""
from __future__ import annotations

import importlib.util
import pathlib

from .results import ROOT

FOLDER = ROOT / "tools" / "kernel_edits"


def load(edit):
    """The edit module: `edit` is a path, or a name in tools/kernel_edits/ ("gemm07_pingpong")."""
    path = pathlib.Path(edit)
    if not path.suffix:
        path = FOLDER / f"{edit}.py"
    if not path.exists():
        raise FileNotFoundError(f"no kernel edit {edit!r} (looked for {path}); the edits: "
                                f"{', '.join(sorted(p.stem for p in FOLDER.glob('*.py')))}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def swap(text: str, old: str, new: str) -> str:
    """`text` with its one `old` replaced by `new`: an edit's replacement, failing loudly (AssertionError naming
    `old`) when the kernel no longer has exactly one, so an edit that no longer fits its kernel says so."""
    assert text.count(old) == 1, f"the kernel no longer has exactly one {old!r}"
    return text.replace(old, new)


def rung_text(edit, stage) -> str:
    """The kernel text the edit applies to: the rung's source now, or, for an edit with a BASE (one the rung has
    adopted since, or one written for the rung before it changed), the source at BASE, read from git (a checkout
    with its history)."""
    path = pathlib.Path(stage.SOURCE)
    base = getattr(edit, "BASE", None)
    if base is None:
        return path.read_text()
    import subprocess
    done = subprocess.run(["git", "-C", str(ROOT), "show", f"{base}:{path.relative_to(ROOT).as_posix()}"],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the edit {edit.__name__} applies to {path.name} at commit {base}, which git cannot show "
                           f"here ({done.stderr.strip()}): this needs a checkout with the project's history")
    return done.stdout


def edited_source(edit) -> str:
    """The text of the edit's rung's kernel with the edit applied."""
    from . import track as tracks
    module = load(edit) if not hasattr(edit, "edit") else edit
    stage = tracks.get(module.TRACK).stage(module.STAGE)
    return module.edit(rung_text(module, stage))
