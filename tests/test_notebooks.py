"""Notebooks match their sources, labs are derived from solutions, and labs carry no outputs."""
import json
import pathlib

import pytest

import cudabook
from cudabook import labs, notebooks

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_notebook_matches_its_source():
    problems = notebooks.drift()
    assert not problems, "\n".join(problems)


def test_committed_notebooks_have_no_outputs():
    for folder in ("notebooks", "labs", "solutions"):
        for path in (ROOT / folder).glob("*.ipynb"):
            for cell in json.loads(path.read_text())["cells"]:
                assert not cell.get("outputs"), f"{path.relative_to(ROOT)} has outputs: clear them"


def test_each_lab_has_a_solution_and_a_todo():
    for lab in (ROOT / "labs").glob("*.ipynb"):
        assert (ROOT / "solutions" / f"{lab.stem}_SOLUTION.ipynb").exists()
        assert "# TODO:" in lab.read_text()


def test_labs_are_the_solution_minus_the_marked_regions():
    code = "def k():\n    x = 1\n    # >>> lab: do the thing\n    y = 2\n    # <<< lab\n    return x\n"
    assert notebooks.blank_regions(code) == "def k():\n    x = 1\n    # TODO: do the thing\n    pass\n    return x\n"
    assert notebooks.strip_markers(code) == "def k():\n    x = 1\n    y = 2\n    return x\n"


def test_an_unclosed_region_is_an_error():
    with pytest.raises(notebooks.SourceError, match="never closed"):
        notebooks.blank_regions("# >>> lab: x\ny = 1\n")


def test_an_unknown_kernel_directive_is_an_error():
    with pytest.raises(notebooks.SourceError, match="no function nope"):
        notebooks.expand("#! kernel resample/s01_naive nope")


def test_grader_without_a_kernel_says_what_to_do(capsys):
    assert not labs.grade("01_naive", None)
    assert "define the kernel in the cell above" in capsys.readouterr().out


def test_grader_on_the_unfilled_lab_kernel_points_at_the_todo(capsys):
    from numba import cuda

    @cuda.jit
    def resample_naive(times, feats, targets, out):
        pass

    assert not labs.grade("01_naive", resample_naive)
    out = capsys.readouterr().out
    assert "still the TODO" in out and "one thread per target" in out


def test_grader_passes_the_solution(capsys):
    from cudabook.resample.s01_naive import resample_naive
    assert labs.grade("01_naive", resample_naive)
    assert "PASS" in capsys.readouterr().out


@pytest.mark.skipif(not cudabook.SIMULATOR, reason="on a GPU an out-of-bounds read kills the CUDA context for "
                    "every later test in this process; the simulator raises an IndexError instead")
def test_grader_explains_a_crashing_kernel(capsys):
    from numba import cuda

    @cuda.jit
    def broken(times, feats, targets, out):
        out[0, 0, 0] = times[10 ** 6, 0]

    assert not labs.grade("01_naive", broken)
    assert "raised an error" in capsys.readouterr().out
