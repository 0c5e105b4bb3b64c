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
    from cudabook import edits
    edit = _load(path)
    module = tracks.get(edit.TRACK).stage(edit.STAGE)
    text = edits.rung_text(edit, module)                  # at the edit's BASE for one the rung has adopted
    edited = edit.edit(text)
    assert edited != text and edit.__doc__
    assert module.compile_cubin(source_text=edited, **getattr(edit, "PARAMS", {}))
    if hasattr(edit, "BASE") and getattr(edit, "ADOPTED", True):   # adopted: the rung's kernel has its lines now
        with pytest.raises(AssertionError, match="no longer has"):
            edit.edit(pathlib.Path(module.SOURCE).read_text())


def test_an_edit_that_no_longer_fits_fails_loudly():
    edit = _load(EDITS[0])
    with pytest.raises(AssertionError, match="no longer has"):
        edit.edit("// a kernel without the lines the edit replaces\n")


def test_an_adopted_edit_whose_base_git_cannot_show_says_so():
    """An edit the rung has adopted reads the kernel at its BASE from git: a commit this checkout lacks (a copy
    made with git archive, or a shallow clone) is an error that names the edit, the file and the commit."""
    import types

    from cudabook import edits
    edit = _load(ROOT / "tools" / "kernel_edits" / "msda05_vector_locations.py")
    module = tracks.get(edit.TRACK).stage(edit.STAGE)
    missing = types.SimpleNamespace(__name__="msda05_nowhere", BASE="0" * 40)
    with pytest.raises(RuntimeError, match=r"msda05_nowhere applies to lane_groups.cu at commit 0{40}.*history"):
        edits.rung_text(missing, module)
    assert edits.rung_text(types.SimpleNamespace(), module) == pathlib.Path(module.SOURCE).read_text()


def test_every_probe_of_an_edit_names_an_edit_of_that_rung():
    """results/readings/*_edit_<name>.json (tools/probe_kernel_edit.py) comes from tools/kernel_edits/<name>.py,
    which edits the rung the reading is filed under: a renamed or deleted edit leaves no orphan reading."""
    import json
    from cudabook import results
    readings = sorted((results.RESULTS / "readings").glob("*_edit_*.json"))
    assert readings
    for path in readings:
        record = json.loads(path.read_text())
        name = path.stem.split("_edit_", 1)[1]
        profiled = "_profile_edit_" in path.name           # (cudabook.profile.profile_edit's readings)
        assert record["edit"] == (name if profiled else f"{name}.py"), path.name
        if profiled:
            record["edit"] += ".py"
        edit = _load(ROOT / "tools" / "kernel_edits" / record["edit"])
        assert (edit.TRACK, edit.STAGE) == (record["track"], record["stage"]), path.name
        assert path.name.endswith(f"_{edit.TRACK}_{edit.STAGE}_{'profile_' if profiled else ''}edit_{name}.json")


def test_show_edits_prints_each_probe_and_says_when_there_is_none():
    from cudabook import results
    lines = []
    assert results.show_edits("gemm", "07_clusters", out=lines.append) >= 1
    assert any("gemm07_pingpong.py" in line for line in lines)
    assert any("rung / edited" in line and "µs" in line for line in lines)
    lines.clear()
    assert results.show_edits("gemm", "01_naive", out=lines.append) == 0
    assert lines == ["no probes of an edited gemm 01_naive kernel in results/readings/"]


def test_show_edits_prints_the_back_to_back_runs_where_a_probe_has_them(monkeypatch, tmp_path):
    """probe_kernel_edit.py --sustained adds each kernel run back to back for some seconds (what a long job sees):
    show_edits prints it under the rounds."""
    import json
    from cudabook import results
    (tmp_path / "readings").mkdir()
    case = {"workload": "w", "correct": {"rung": True, "edited": True}, "us": {"rung": [10.0], "edited": [8.0]},
            "rung / edited": 1.25, "sustained": {"seconds": 2.0, "us": {"rung": [11.0, 11.0], "edited": [10.0, 10.0]},
                                                  "rung / edited": 1.1}}
    (tmp_path / "readings" / "H200_msda_05_lane_groups_edit_x.json").write_text(json.dumps(
        {"track": "msda", "stage": "05_lane_groups", "edit": "x.py", "gpu": "NVIDIA H200", "commit": "c",
         "what": "x", "cases": [case]}))
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    lines = []
    assert results.show_edits("msda", "05_lane_groups", out=lines.append) == 1
    assert lines[-1].strip() == ("back to back, 2 s each: rung 11.0 µs, edited 10.0 µs, rung / edited 1.100x")


def test_an_unknown_edit_is_refused_with_the_edits_there_are():
    from cudabook import edits
    with pytest.raises(FileNotFoundError, match=r"no kernel edit 'gemm07_nonesuch' .*gemm07_pingpong"):
        edits.load("gemm07_nonesuch")
