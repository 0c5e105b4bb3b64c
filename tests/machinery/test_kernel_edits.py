"""tools/kernel_edits: each edit still fits the kernel it edits (its replacements find their text) and the edited
copy compiles, so a probe of it (tools/probe_kernel_edit.py) can be run again on a GPU."""
import pathlib
import sys

import pytest

from cudabook import track as tracks

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.probe_kernel_edit import load_edit as _load  # noqa: E402  (how the probe reads an edit)

EDITS = sorted((ROOT / "tools" / "kernel_edits").glob("*.py"))


@pytest.mark.parametrize("path", EDITS, ids=[p.stem for p in EDITS])
def test_an_edit_fits_its_kernel_and_compiles(path):
    edit = _load(path)
    module = tracks.get(edit.TRACK).stage(edit.STAGE)
    text = pathlib.Path(module.SOURCE).read_text()
    edited = edit.edit(text)
    assert edited != text and edit.__doc__
    assert module.compile_cubin(source_text=edited, **getattr(edit, "PARAMS", {}))


def test_an_edit_that_no_longer_fits_fails_loudly():
    edit = _load(EDITS[0])
    with pytest.raises(AssertionError, match="no longer has"):
        edit.edit("// a kernel without the lines the edit replaces\n")
