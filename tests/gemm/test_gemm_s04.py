"""GEMM 04 mma.sync: tensor cores fed by ldmatrix from a swizzled cp.async ring.

CPU (no GPU needed): the kernel compiles for sm_80 and sm_90a; its SASS has the tensor-core instruction
(HMMA.16816.F32.BF16), ldmatrix (LDSM) and cp.async (LDGSTS); no register spills; the bank picture says the
swizzled layout is conflict-free and the plain one is not; the lab region is there and splicing its lines
back gives the same kernel; without a GPU, run() says what the stage needs (compute capability 8.0), and the
stage's own launch runs in the CPU emulator (cudabook.emulate) at several tile shapes and pipeline depths.
GPU: the checker's ragged cases plus 1x1x1, 129x257x72 and K = 7, once at 4096^3; both swizzle settings;
2, 3 and 4 stages; other tile shapes; compute-sanitizer memcheck and racecheck on a small problem.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cudabook import device, gemm, notebooks, nvrtc
from cudabook.gemm import s04_mma_sync as s04
from helpers import sass_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[2]
REGION = "gemm/kernels/mma_sync.cu"


# ------------------------------------------------------------------------------------------ CPU

def test_stage_is_listed():
    assert "04_mma_sync" in gemm.STAGES and gemm.stage(4) is s04
    assert s04.NAME == "04_mma_sync" and s04.MIN_CC == (8, 0) and s04.SOURCE.is_file()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_sass_has_hmma_ldsm_ldgsts(arch):
    sass_or_skip()
    cubin = s04.compile_cubin(arch)
    assert cubin[:4] == b"\x7fELF"
    hmma = nvrtc.sass_lines(cubin, r"^HMMA", kernel=s04.KERNEL)
    assert hmma and all("16816.F32.BF16" in h for h in hmma), hmma[:3]
    assert nvrtc.sass_lines(cubin, r"^LDSM\.16\.M88\.4", kernel=s04.KERNEL)      # ldmatrix.x4 (A)
    assert nvrtc.sass_lines(cubin, r"^LDSM\.16\.MT88\.4", kernel=s04.KERNEL)     # ldmatrix.x4.trans (B)
    copies = nvrtc.sass_lines(cubin, r"^LDGSTS", kernel=s04.KERNEL)
    assert copies and all("BYPASS" in c and c.split()[0].endswith(".128") for c in copies), copies[:3]  # 16 B, .cg
    assert nvrtc.sass_lines(cubin, r"^F2FP\.BF16", kernel=s04.KERNEL)            # cvt.rn.bf16x2.f32


@pytest.mark.parametrize("params", [{}, {"swizzle": False}, {"stages": 2}, {"stages": 4},
                                    {"stages": 3}, {"bn": 128, "warps_n": 2},
                                    {"bn": 128, "warps_n": 4}, {"bk": 64, "bn": 128, "warps_n": 4, "stages": 3}])
def test_no_register_spills(params):
    sass_or_skip()
    use = nvrtc.resource_usage(s04.compile_cubin("sm_90a", **params))[s04.KERNEL]
    assert use["local"] == 0 and use["stack"] == 0, use
    assert use["registers"] <= 255


def test_bank_picture():
    for op in ("a", "b"):
        for ks in range(2):
            for tile in range(2):
                assert s04.conflict_ways(s04.ldmatrix_banks(op, True, ks, tile)) == 1
    assert s04.conflict_ways(s04.ldmatrix_banks("a", False)) == 4        # 64-byte rows: two sets of banks
    assert s04.conflict_ways(s04.ldmatrix_banks("b", False)) == 8        # 512-byte rows: all in the same banks
    assert s04.conflict_ways(s04.ldmatrix_banks("a", True, bk=64)) == 1
    assert s04.conflict_ways(s04.ldmatrix_banks("a", False, bk=64)) == 8
    assert s04.conflict_ways(s04.ldmatrix_banks("b", True, bn=64, warps_n=2, bm=64, warps_m=2)) == 1


def test_fragment_ownership():
    f = s04.mma_fragments()
    for name, per_lane in (("a", 8), ("b", 4), ("c", 4)):
        lane, reg = f[name]
        assert (lane >= 0).all() and (reg >= 0).all()            # every element has an owner
        assert all((lane == l).sum() == per_lane for l in range(32))
        assert len({(l, r) for l, r in zip(lane.ravel(), reg.ravel())}) == lane.size   # and only one
    lane, reg = f["c"]
    assert lane[0, 0] == 0 and lane[0, 2] == 1 and lane[8, 0] == 0 and reg[8, 1] == 3 and lane[15, 7] == 31


def test_swizzle_is_a_permutation():
    for cpr in (2, 4, 8, 16, 32):
        rows = 64
        seen = sorted(s04.swizzled_chunk(r, c, cpr) for r in range(rows) for c in range(cpr))
        assert seen == list(range(rows * cpr))
        # a chunk never leaves its 128-byte line
        assert all(s04.swizzled_chunk(r, c, cpr) // 8 == (r * cpr + c) // 8 for r in range(rows) for c in range(cpr))


def test_lab_region_and_splice():
    text = s04.SOURCE.read_text()
    marked = notebooks.region_source(REGION)
    hints = notebooks.lab_hints(text)
    assert len(hints) == 1 and "commit" in hints[0] and "STAGES-2" not in hints[0]   # the hint asks, not tells
    lines = marked.split("\n")
    solution = "\n".join(lines[1:-1])
    assert "cp_async_wait<STAGES - 2>" in solution and "__syncthreads" in solution and "load_slice" in solution
    spliced = text.replace(marked, solution, 1)
    assert spliced == notebooks.strip_markers(text)
    assert s04.compile_cubin("sm_90a", source_text=spliced) == s04.compile_cubin(
        "sm_90a", source_text=notebooks.strip_markers(text))


def test_the_text_checks_flag_the_mistakes_not_the_solution():
    """The lab grader reads some mistakes from the region's text (LAB_TEXT_MISTAKES) and adds hints from it to a
    failed case (LAB_TEXT_HINTS): none fires on the solution, each on its mistake (cudabook/gemm/mistakes.py)."""
    import re
    solution = notebooks.strip_markers(notebooks.region_source(REGION))
    code = lambda text: "\n".join(line.split("//", 1)[0] for line in text.split("\n"))
    assert not any(re.search(p, code(solution), re.S) for p, _ in s04.LAB_TEXT_MISTAKES)
    assert not any(shows(code(solution)) for shows, _ in s04.LAB_TEXT_HINTS)
    wrong = {"rs": solution.replace("stage_a(ws), stage_b(ws)", "stage_a(rs), stage_b(rs)"),
             "kt": solution.replace("stage_a(ws), stage_b(ws)", "stage_a(kt + STAGES - 1), stage_b(kt + STAGES - 1)"),
             "16": solution.replace("(kt + STAGES - 1) * BK", "(kt + STAGES - 1) * 16")}
    assert [shows(code(wrong["rs"])) for shows, _ in s04.LAB_TEXT_HINTS] == [True, False, False]
    assert [shows(code(wrong["kt"])) for shows, _ in s04.LAB_TEXT_HINTS] == [False, True, False]
    assert [shows(code(wrong["16"])) for shows, _ in s04.LAB_TEXT_HINTS] == [False, False, True]
    wrapped = solution.replace("stage_a(ws), stage_b(ws)",
                               "stage_a((kt + STAGES - 1) % STAGES), stage_b((kt + STAGES - 1) % STAGES)")
    assert not any(shows(code(wrapped)) for shows, _ in s04.LAB_TEXT_HINTS)      # the ring index, wrapped: right


def test_bad_params():
    with pytest.raises(TypeError, match="blok_m"):
        s04.config(blok_m=64)
    with pytest.raises(ValueError, match="bk"):
        s04.config(bk=24)
    with pytest.raises(ValueError, match="bk"):
        s04.config(bk=48)
    with pytest.raises(ValueError, match="stages"):
        s04.config(stages=1)


def test_compile_error_names_the_line():
    bad = s04.SOURCE.read_text().replace("load_slice(stage_a(ws)", "load_slise(stage_a(ws)")
    with pytest.raises(nvrtc.CompileError, match="load_slise"):
        s04.compile_cubin("sm_90a", source_text=bad)


@pytest.mark.skipif(device.gpu() is not None, reason="this machine has a GPU")
def test_run_without_gpu_says_what_is_needed():
    a, b = gemm.random_problem(3, 5, 4)
    with pytest.raises(gemm.StageUnavailable) as info:
        gemm.run("04_mma_sync", a, b)
    message = str(info.value)
    assert "04_mma_sync" in message and "compute capability 8.0" in message and "this machine has none" in message


# ------------------------------------------------------------------------------------------ CPU: the emulator

@pytest.mark.skipif(not device.SIMULATOR or not shutil.which("g++") and not shutil.which("clang++"),
                    reason="the emulator runs where Numba's simulator does, with a host C++ compiler")
@pytest.mark.parametrize("params", [{"swizzle": False}, {"stages": 2, "group_m": 1},
                                    {"bk": 64, "bn": 128, "warps_n": 4, "stages": 3},
                                    {"bm": 64, "bn": 64, "warps_m": 2, "warps_n": 2, "stages": 4}])
def test_emulated_on_the_cpu(params):
    """Without a GPU the stage's own launch runs in cudabook.emulate (device.address gives the simulator arrays'
    host addresses; a padded C is copied back on the host): right on a problem whose K is ragged (not a multiple
    of 8: the padded path) and long enough that the ring turns, with two blocks of C at 64 x 64 tiles."""
    from cudabook import emulate
    a, b = gemm.random_problem(70, 60, 300)
    p = gemm.upload(a, b)
    p.poison()
    with emulate.emulating("lazy"):
        s04.launch(p, **params)
    verdict = gemm.judge(p.result(), a, b)
    assert verdict.ok, f"{params}:\n{verdict}"


# ------------------------------------------------------------------------------------------ GPU

def _check(M, N, K, **params):
    a, b = gemm.random_problem(M, N, K)
    got = gemm.run("04_mma_sync", a, b, **params)
    verdict = gemm.judge(got, a, b)
    assert verdict.ok, f"M={M}, N={N}, K={K}, {params}:\n{verdict}"


EXTRA = [("1 x 1 x 1", 1, 1, 1), ("ragged, K = 72", 129, 257, 72), ("K = 7", 100, 96, 7), ("N = 1", 70, 1, 40),
         ("one full tile and one more", 129, 264, 48)]


@pytest.mark.gpu
@pytest.mark.parametrize("name, M, N, K", gemm.cases(simulator=False) + EXTRA)
def test_cases(name, M, N, K):
    _check(M, N, K)


@pytest.mark.gpu
@pytest.mark.parametrize("params", [{"swizzle": False}, {"stages": 2}, {"stages": 3}, {"stages": 4},
                                    {"bn": 128, "warps_n": 2}, {"bn": 128, "warps_n": 4},
                                    {"bk": 64, "bn": 128, "warps_n": 4, "stages": 3}, {"group_m": 1},
                                    {"bm": 64, "bn": 64, "warps_m": 2, "warps_n": 2}])
@pytest.mark.parametrize("name, M, N, K", [("ragged", 333, 517, 200), ("K = 7", 130, 250, 7),
                                           ("tile multiples", 256, 512, 256)])
def test_params(params, name, M, N, K):
    _check(M, N, K, **params)


@pytest.mark.gpu
def test_4096_once():
    _check(4096, 4096, 4096)


@pytest.mark.gpu
def test_learner_source_is_used():
    text = notebooks.strip_markers(s04.SOURCE.read_text())   # a learner's whole source, markers gone
    a, b = gemm.random_problem(256, 256, 512)
    from cudabook.gemm import upload
    p = upload(a, b)
    p.poison()
    s04.launch(p, kernel=text)
    assert gemm.judge(p.result(), a, b).ok


SMALL = ("import cudabook; from cudabook import gemm; "
         "a, b = gemm.random_problem(129, 257, 72); "
         "v = gemm.judge(gemm.run('04_mma_sync', a, b), a, b); print(v); assert v.ok")


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer(tool):
    exe = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.access(p, os.X_OK)), None)
    if exe is None:
        pytest.skip("compute-sanitizer is not on PATH (it comes with the CUDA toolkit)")
    run = subprocess.run([exe, "--tool", tool, sys.executable, "-c", SMALL], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    text = run.stdout + run.stderr
    summary = "ERROR SUMMARY: 0 errors" if tool == "memcheck" else "RACECHECK SUMMARY: 0 hazards displayed (0 errors"
    assert summary in text, text[-3000:]
    assert run.returncode == 0, text[-3000:]
