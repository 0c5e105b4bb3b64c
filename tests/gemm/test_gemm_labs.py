"""The GEMM track's labs: the grader takes the track; each C++ lab's solution region spliced back is the stage's
own file; the TODO, a compile error and a machine that cannot run the stage each get their message; and on a
GPU the solution passes. The mistakes learners make (cudabook/gemm/mistakes.py: the Numba lab's and the C++
labs') still compile here; tests/gemm/test_gemm_mistakes.py grades them, each failing with a message that
points at it.
"""
import re
import textwrap

import shutil

import pytest

from cudabook import SIMULATOR, gemm, labs, notebooks
from cudabook.gemm.mistakes import MISTAKES

HOST_CXX = bool(shutil.which("g++") or shutil.which("clang++") or shutil.which("c++"))
CUDA_LABS = [("04_mma_sync", "gemm/kernels/mma_sync.cu"), ("05_wgmma_tma", "gemm/kernels/wgmma_tma.cu"),
             ("06_warp_specialized", "gemm/kernels/warp_specialized.cu"), ("07_clusters", "gemm/kernels/clusters.cu"),
             ("08_fp8", "gemm/kernels/clusters.cu#08_fp8")]     # 08's lab: the region of clusters.cu tagged 08_fp8


def _region(path):
    path, _, tag = path.partition("#")
    return notebooks.strip_markers(textwrap.dedent(notebooks.region_source(path, tag or None)))


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_solution_region_spliced_back_is_the_stage_source(stage, path):
    spliced = labs.splice(stage, _region(path), track="gemm")
    original = (notebooks.PACKAGE / path.partition("#")[0]).read_text()
    assert notebooks.strip_markers(original).split() == notebooks.strip_markers(spliced).split()


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_todo_says_what_to_write(stage, path, capsys):
    assert not labs.grade(stage, "    // TODO: whatever\n", track="gemm")
    out = capsys.readouterr().out
    assert "still the TODO" in out and labs.hint(stage, track="gemm") in out


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_a_compile_error_is_shown_with_its_line(stage, path, capsys):
    assert not labs.grade(stage, "int x = ;", track="gemm")
    out = capsys.readouterr().out
    assert "does not compile" in out and "int x = ;" in out and "expected an expression" in out


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_where_it_cannot_run_it_compiles_and_says_why(stage, path, capsys):
    if not gemm.unavailable(stage):
        pytest.skip(f"this machine runs {stage}: the GPU test grades it for real")
    if getattr(gemm.stage(stage), "EMULATED", False) and SIMULATOR:
        pytest.skip(f"{stage} is graded in the CPU emulator here (test_the_emulator_grades_lab_04)")
    assert not labs.grade(stage, _region(path), track="gemm")
    out = capsys.readouterr().out
    assert "compiles" in out and "cannot run it" in out


def test_lab_04_is_emulated_and_needs_sm_80():
    """Lab 04 uses cp.async, ldmatrix and mma.sync (sm_80), which the emulator has; nothing of Hopper's."""
    s04 = gemm.stage("04_mma_sync")
    assert s04.EMULATED and s04.MIN_CC == (8, 0) and not s04.RUNG.sm90a
    source = s04.source()
    assert not any(word in source for word in ("wgmma", "stmatrix", "cluster", "mbar_", "cp.async.bulk"))


@pytest.mark.skipif(not SIMULATOR or not HOST_CXX, reason="the emulator runs where Numba's simulator does, with a "
                                                          "host C++ compiler")
def test_the_emulator_grades_lab_04(capsys):
    """Without a GPU the solution of lab 04 passes in the emulator, on cases where the copy ring turns: K = 300 is
    10 slices of 32, more than twice the deepest ring graded (4 stages), so every stage is refilled."""
    assert labs.grade("04_mma_sync", _region("gemm/kernels/mma_sync.cu"), track="gemm")
    out = capsys.readouterr().out
    assert "PASS" in out and "run on the CPU by the emulator" in out and "cannot run it" not in out
    from cudabook.gemm import s04_mma_sync as s04
    stages = max(v.get("stages", s04.PARAMS["stages"]) for v in s04.GRADING_VARIANTS)
    slices = max(-(-K // s04.PARAMS["bk"]) for _, _, _, K in gemm.cases(simulator=True, stage_name="04_mma_sync"))
    assert slices > 2 * stages
    for stages in {v.get("stages", s04.PARAMS["stages"]) for v in s04.GRADING_VARIANTS}:
        assert f"K=300{'' if stages == s04.PARAMS['stages'] else f', stages={stages}'})" in out


def _wrong(stage):
    """The planted mistakes of a C++ lab (cudabook/gemm/mistakes.py; tests/gemm/test_gemm_mistakes.py grades
    them)."""
    return [m for m in MISTAKES if m.stage == stage]


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_wrong_attempts_still_compile(stage, path):
    module = gemm.stage(stage)
    for m in _wrong(stage):
        region = _region(path)
        for old, new in m.edits:
            assert old in region, m.what
            region = region.replace(old, new)
        source = labs.splice(stage, region, track="gemm")
        assert module.compile_cubin(arch="sm_90a", source_text=source)[:4] == b"\x7fELF", m.what


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_compiler_log_checks_do_not_flag_the_solution(stage, path):
    """A missing wgmma wait may still give right results (ptxas inserts one, C7517): the grader reads the
    compiler's log, so it fails the attempt everywhere, with or without a GPU (a planted mistake each), and the
    solution is not flagged."""
    from cudabook import nvrtc
    module = gemm.stage(stage)
    assert not any(re.search(p, nvrtc.compile_log(module.compile_cubin()))
                   for p, _ in getattr(module, "COMPILE_LOG_MISTAKES", ()))


@pytest.mark.hopper
@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_grader_passes_the_solution(stage, path, capsys):
    why = gemm.unavailable(stage)
    if why:
        pytest.skip(why)
    assert labs.grade(stage, _region(path), track="gemm"), capsys.readouterr().out
    assert "PASS" in capsys.readouterr().out


@pytest.mark.skipif(not SIMULATOR or not HOST_CXX, reason="the emulator runs where Numba's simulator does, with a "
                                                          "host C++ compiler")
def test_the_emulator_grades_lab_08(capsys):
    """Without a GPU the solution of lab 08 (the FP8 k-tile, a tagged region of clusters.cu) passes in the emulator,
    judged by 08's own judge (the product of the quantised inputs, the 13-bit sums allowed for)."""
    assert labs.grade("08_fp8", _region("gemm/kernels/clusters.cu#08_fp8"), track="gemm"), capsys.readouterr().out
    out = capsys.readouterr().out
    assert "PASS: 08_fp8" in out and "run on the CPU by the emulator" in out
