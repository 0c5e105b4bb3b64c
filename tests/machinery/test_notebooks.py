"""Notebooks match their sources, labs are derived from solutions, and labs carry no outputs."""
import json
import pathlib

import pytest

import cudabook
from cudabook import notebooks, resample

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_notebook_matches_its_source():
    problems = notebooks.drift()
    assert not problems, "\n".join(problems)


def test_no_cell_marker_carries_text():
    """A lesson source's `# %% [markdown]` or `# %%` line holds nothing after the marker: jupytext reads what follows
    on that line as the cell's header, so a paragraph begun there loses its first line from the notebook (a rewrap
    once did that to lesson 05)."""
    import re
    bad = [f"{path.relative_to(ROOT)}:{n}: {line[:60]}"
           for path in sorted((ROOT / "lessons").glob("**/*.py"))
           for n, line in enumerate(path.read_text().splitlines(), 1)
           if line.startswith("# %%") and not re.fullmatch(r"# %%( \[markdown\])? *", line)]
    assert not bad, bad


def test_committed_notebooks_have_no_outputs():
    for folder in ("notebooks", "labs", "solutions"):
        for path in list((ROOT / folder).glob("*.ipynb")) + list((ROOT / folder).glob("*/*.ipynb")):
            for cell in json.loads(path.read_text())["cells"]:
                assert not cell.get("outputs"), f"{path.relative_to(ROOT)} has outputs: clear them"


def test_each_lab_has_a_solution_and_a_todo():
    labs = list((ROOT / "labs").glob("*/*.ipynb"))
    assert labs
    for lab in labs:
        assert (ROOT / "solutions" / lab.parent.name / f"{lab.stem}_SOLUTION.ipynb").exists()
        assert "# TODO:" in lab.read_text() or "// TODO:" in lab.read_text()


def test_relative_links_point_at_files():
    """Every relative link `](path)` in a notebook's text, the README and the guide names a file that exists."""
    import re

    def texts():
        for folder in ("notebooks", "labs", "solutions"):
            for path in list((ROOT / folder).glob("*.ipynb")) + list((ROOT / folder).glob("*/*.ipynb")):
                for cell in json.loads(path.read_text())["cells"]:
                    if cell["cell_type"] == "markdown":
                        yield path, "".join(cell["source"])
        for name in ("README.md", "GUIDE.md"):
            yield ROOT / name, (ROOT / name).read_text()

    broken, seen = [], 0
    for path, text in texts():
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link) or link.startswith("#"):
                continue                                          # a web address, or a heading of the same page
            seen += 1
            if not (path.parent / link.split("#")[0]).exists():
                broken.append(f"{path.relative_to(ROOT)}: {link}")
    assert seen > 100 and not broken, "links to no file:\n" + "\n".join(broken)


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
    assert not resample.grade("01_naive", None)
    assert "define the kernel in the cell above" in capsys.readouterr().out


def test_grader_on_the_unfilled_lab_kernel_points_at_the_todo(capsys):
    from numba import cuda

    @cuda.jit
    def resample_naive(times, feats, targets, out):
        pass

    assert not resample.grade("01_naive", resample_naive)
    out = capsys.readouterr().out
    assert "still the TODO" in out and "one thread per target" in out


def test_grader_passes_the_solution(capsys):
    from cudabook.resample.s01_naive import resample_naive
    assert resample.grade("01_naive", resample_naive)
    assert "PASS" in capsys.readouterr().out


@pytest.mark.skipif(not cudabook.SIMULATOR, reason="on a GPU an out-of-bounds read kills the CUDA context for "
                    "every later test in this process; the simulator raises an IndexError instead")
def test_grader_explains_a_crashing_kernel(capsys):
    from numba import cuda

    @cuda.jit
    def broken(times, feats, targets, out):
        out[0, 0, 0] = times[10 ** 6, 0]

    assert not resample.grade("01_naive", broken)
    assert "raised an error" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------------
# CUDA C++ labs (06, 07): the learner writes a region of the .cu file; the grader splices it back
# ----------------------------------------------------------------------------------------------------------
CUDA_LABS = [("06_cp_async", "resample/kernels/cp_async.cu"), ("07_tma", "resample/kernels/tma.cu"),
             ("08_fused_gather", "resample/kernels/fused_gather.cu")]


def test_a_region_directive_names_a_missing_file():
    with pytest.raises(notebooks.SourceError, match="no file"):
        notebooks.expand("#! region resample/kernels/nope.cu CODE")


def test_a_region_directive_needs_exactly_one_region():
    with pytest.raises(notebooks.SourceError, match="exactly one"):
        notebooks.expand("#! region resample/kernels/resample_common.cuh CODE")


def test_cuda_markers_become_a_todo_comment():
    code = "void k() {\n    int x = 1;\n    // >>> lab: do the thing\n    x += 2;\n    // <<< lab\n}\n"
    assert notebooks.blank_regions(code) == "void k() {\n    int x = 1;\n    // TODO: do the thing\n}\n"
    assert notebooks.strip_markers(code) == "void k() {\n    int x = 1;\n    x += 2;\n}\n"


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_solution_region_spliced_back_is_the_stage_source(stage, path):
    """The region a solution notebook holds, put back by the grader, gives the stage's own file: the lab, the
    solution and the stage share one copy of the kernel."""
    import textwrap
    region = notebooks.strip_markers(textwrap.dedent(notebooks.region_source(path)))
    spliced = resample.splice(stage, region)
    original = (notebooks.PACKAGE / path).read_text()
    assert notebooks.strip_markers(original).split() == spliced.split()      # equal up to indentation


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_cuda_grader_on_the_todo_says_what_to_write(stage, path, capsys):
    assert not resample.grade(stage, "    // TODO: whatever\n")
    out = capsys.readouterr().out
    assert "still the TODO" in out and resample.hint(stage) in out


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_cuda_grader_shows_the_compile_error_with_its_line(stage, path, capsys):
    assert not resample.grade(stage, "int x = ;")
    out = capsys.readouterr().out
    assert "does not compile" in out and "int x = ;" in out and "expected an expression" in out
    assert "(your line 1)" in out       # numbered as in the learner's cell too


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_cuda_grader_emulates_where_it_cannot_run(stage, path, capsys):
    """Without a GPU that runs the stage, the grader runs the learner's kernel on the CPU (cudabook.emulate)."""
    from cudabook import resample
    if not resample.unavailable(stage):
        pytest.skip(f"this machine runs {stage}: the GPU test grades it for real")
    region = notebooks.strip_markers(notebooks.region_source(path))
    assert resample.grade(stage, region)
    out = capsys.readouterr().out
    assert "PASS" in out and "emulator" in out


WRONG_REGIONS = {  # a plausible mistake per lab, which must not pass (and must not hang the GPU)
    "06_cp_async": ("cp_async_wait<STAGES - 1>();", "cp_async_wait<STAGES - 1>();\n__syncthreads(); return;"),
    "07_tma": ("L + r * BOXR", "L + r * BOXR + 1"),
    "08_fused_gather": ("c[u][q] = __ldg(f + from + q * EPR + VPR);", "c[u][q] = __ldg(f + from + q * EPR + 1);"),
}


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_cuda_grader_passes_the_solution_and_fails_a_mistake(stage, path, capsys):
    """On a GPU that runs the stage, for real; elsewhere in the emulator."""
    region = notebooks.strip_markers(notebooks.region_source(path))
    assert resample.grade(stage, region), capsys.readouterr().out
    assert "PASS" in capsys.readouterr().out
    old, new = WRONG_REGIONS[stage]
    assert old in region
    assert not resample.grade(stage, region.replace(old, new))


def test_show_region_names_a_marker_the_source_lacks(capsys):
    # a kernel edited under a lesson must break the lesson's cell, not print the whole file in its place
    from cudabook import lesson
    source = "a\n// >>> lab: the untagged region\nb\n// <<< lab\nc\n  // >>> lab[x]: a tagged one\nd\n  // <<< lab\n"
    lesson.show_region(source)
    assert capsys.readouterr().out.split() == ["3", "b"]
    lesson.show_region(source, tag="x")                  # a region tagged lab[x], as rung 08's in GEMM 07's file
    assert capsys.readouterr().out.split() == ["7", "d"]
    with pytest.raises(ValueError, match=r"lab\[y\]"):
        lesson.show_region(source, tag="y")
    with pytest.raises(ValueError, match="start='nowhere'"):
        lesson.show_region(source, start="nowhere")
    with pytest.raises(ValueError, match="end='nowhere'"):
        lesson.show_region(source, start="a", end="nowhere")
