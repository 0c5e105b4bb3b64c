"""The GEMM track's labs: the grader takes the track; each C++ lab's solution region spliced back is the stage's
own file; the TODO, a compile error and a machine that cannot run the stage each get their message; and on a
GPU the solution passes while the mistakes learners make fail, each with a message that points at it.
"""
import re
import textwrap

import pytest

from cudabook import gemm, labs, notebooks

CUDA_LABS = [("04_mma_sync", "gemm/kernels/mma_sync.cu"), ("05_wgmma_tma", "gemm/kernels/wgmma_tma.cu"),
             ("06_warp_specialized", "gemm/kernels/warp_specialized.cu"), ("07_clusters", "gemm/kernels/clusters.cu")]


def _region(path):
    return notebooks.strip_markers(textwrap.dedent(notebooks.region_source(path)))


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_solution_region_spliced_back_is_the_stage_source(stage, path):
    spliced = labs.splice(stage, _region(path), track="gemm")
    original = (notebooks.PACKAGE / path).read_text()
    assert notebooks.strip_markers(original).split() == spliced.split()


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
    assert not labs.grade(stage, _region(path), track="gemm")
    out = capsys.readouterr().out
    assert "compiles" in out and "cannot run it" in out


# The mistakes learners make, as edits of the solution region: (what, old, new, a phrase the grader must say).
WRONG = {
    "04_mma_sync": [
        ("K-loop tail forgotten: the last slice is never loaded (its stage keeps an older slice)",
         "if (kt + STAGES - 1 < KT)", "if (kt + STAGES - 1 < KT - 1)", "every K tile is loaded"),
        ("a slice skipped: copies run one slice too far ahead", "(kt + STAGES - 1) * BK", "(kt + STAGES) * BK",
         "wrong"),
        ("a wait one commit group short: slice kt+1 may still be in flight", "cp_async_wait<STAGES - 2>();",
         "cp_async_wait<STAGES - 1>();", None),
        ("the commit only when a slice was issued: the group count is off at the end of K",
         "cp_async_commit();", "if (kt + STAGES - 1 < KT) cp_async_commit();", "cp_async_commit() sits under an if"),
    ],
    "05_wgmma_tma": [
        ("A's k16 step of 16 bytes instead of 32 (16 bf16 are 32 bytes)", "a + 32 * kk", "a + 16 * kk", "wrong"),
        ("B treated as K-major: its k16 step along the row, not 16 rows down", "b + 2048 * kk", "b + 32 * kk",
         "wrong"),
        ("LBO and SBO swapped in B's descriptor", "smem_desc(b + 2048 * kk, B_BOX_BYTES, 1024)",
         "smem_desc(b + 2048 * kk, 1024, B_BOX_BYTES)", "wrong"),
        ("A's descriptor says 64-byte swizzle; the tensor map wrote 128-byte", "smem_desc(a + 32 * kk, 16, 1024)",
         "(smem_desc(a + 32 * kk, 16, 1024) & ~(3ull << 62) | 2ull << 62)", "wrong"),
        ("no wait: the stage is refilled while the wgmmas may still read it", "wgmma_wait<0>();", "",
         "the compiler had to step in"),
    ],
    "06_warp_specialized": [
        ("full barrier waited with the wrong parity (phase off by one)", "mbar_wait(full + 8 * s, phase);",
         "mbar_wait(full + 8 * s, phase ^ 1);", None),
        ("the stage is released before the wgmmas finished reading it", "wgmma_wait<0>();", "",
         "the compiler had to step in"),
    ],
    "07_clusters": [
        ("the phase never flips: the second lap reads stages that are not full yet",
         "if (++s == STAGES) { s = 0; phase ^= 1; }", "if (++s == STAGES) { s = 0; }", None),
        ("the full barrier waited with the wrong parity", "mbar_wait(full + 8 * s, phase);",
         "mbar_wait(full + 8 * s, phase ^ 1);", None),
    ],
}


def test_every_wrong_attempt_edits_the_solution():
    for stage, path in CUDA_LABS:
        region = _region(path)
        for what, old, new, _ in WRONG[stage]:
            assert old in region, f"{stage}: the planted mistake '{what}' no longer applies to the lab region"


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_wrong_attempts_still_compile(stage, path):
    module = gemm.stage(stage)
    for what, old, new, _ in WRONG[stage]:
        source = labs.splice(stage, _region(path).replace(old, new), track="gemm")
        assert module.compile_cubin(arch="sm_90a", source_text=source)[:4] == b"\x7fELF", what


def _grade_elsewhere(stage, region, tmp_path):
    """Grade in a fresh process: a trapped kernel (the watchdog) or an illegal address leaves the CUDA context
    of its process unusable, and must not take the rest of the tests with it."""
    import subprocess
    import sys
    file = tmp_path / "region.cu"
    file.write_text(region)
    code = ("import pathlib, cudabook; from cudabook import labs; "
            f"ok = labs.grade({stage!r}, pathlib.Path({str(file)!r}).read_text(), track='gemm'); "
            "raise SystemExit(0 if ok else 3)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return done.returncode == 0, done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_mistakes_the_compiler_betrays_are_caught_on_any_machine(stage, path, capsys):
    """A missing wgmma wait may still give right results (ptxas inserts one, C7517): the grader reads the
    compiler's log, so it fails the attempt everywhere, with or without a GPU, and the solution is not flagged."""
    from cudabook import nvrtc
    module = gemm.stage(stage)
    assert not any(re.search(p, nvrtc.compile_log(module.compile_cubin()))
                   for p, _ in getattr(module, "COMPILE_LOG_MISTAKES", ()))
    for what, old, new, phrase in WRONG[stage]:
        if phrase in ("the compiler had to step in", "cp_async_commit() sits under an if"):
            assert not labs.grade(stage, _region(path).replace(old, new), track="gemm"), what
            out = capsys.readouterr().out
            assert phrase in out, out
            if "compiler" in phrase:
                assert "C7517" in out and "wgmma_wait<0>()" in out, out


@pytest.mark.hopper
@pytest.mark.parametrize("stage,path", CUDA_LABS)
def test_the_grader_passes_the_solution_and_fails_each_mistake(stage, path, capsys, tmp_path):
    why = gemm.unavailable(stage)
    if why:
        pytest.skip(why)
    assert labs.grade(stage, _region(path), track="gemm"), capsys.readouterr().out
    assert "PASS" in capsys.readouterr().out
    for what, old, new, phrase in WRONG[stage]:
        ok, out = _grade_elsewhere(stage, _region(path).replace(old, new), tmp_path)
        print(f"--- {stage}: {what}\n{out}")          # the messages, for whoever reads the log (pytest -s)
        assert not ok, (what, out)
        assert any(s in out for s in ("FAIL", "raised an error", "the compiler had to step in", "Not graded yet")), \
            (what, out)
        if phrase:
            assert phrase in out, (what, out)


# ----------------------------------------------------------------------------------------------------------
# The Numba lab, 02_smem_tiles: learner-style mistakes as edits of the real kernel, through the grader
# ----------------------------------------------------------------------------------------------------------
# (what, edits of gemm_tiled, a phrase the message must hold, why only the simulator shows it or None). The
# grader's simulator cases have K = 20, 13, 1 and 37 with TILE = 16: two or three K tiles, the last one partial.
RACE = "a race"
INDEXING = "check the indexing of a and b"
NUMBA_HINTS = ("without the last", "without the first", "without the term(s)", "counted twice",
               "rounding inside the loop", "too small in magnitude", INDEXING, "never written", RACE, "still the TODO")
OUT_OF_BOUNDS = "sim: the simulator checks indices; on a GPU the read lands in memory nobody checks"
NUMBA_WRONG = [
    ("the k loop of a tile stops one short (range(TILE - 1))", [("for k in range(TILE):", "for k in range(TILE - 1):")],
     "the last k of every", None),
    ("the K tiles counted rounding down: the last, partial tile skipped",
     [("for k0 in range(0, K, TILE):", "for k0 in range(0, K - TILE + 1, TILE):")], "without the last", None),
    ("no barrier after the loads: a tile read before every thread has written it",
     [("Bs[ty, tx] = b_val\n        cuda.syncthreads()", "Bs[ty, tx] = b_val")], RACE,
     "sim: a race a GPU may not show"),
    ("no barrier after the multiply-adds: the next tile overwrites one still being read",
     [("acc += As[ty, k] * Bs[k, tx]\n        cuda.syncthreads()", "acc += As[ty, k] * Bs[k, tx]")], RACE,
     "sim: a race a GPU may not show (one tile ahead, rare at one tile per block)"),
    ("the B tile read transposed in the multiply-adds", [("As[ty, k] * Bs[k, tx]", "As[ty, k] * Bs[tx, k]")],
     INDEXING, None),
    ("the sum rounded to bf16 at every step", [("acc += As[ty, k] * Bs[k, tx]",
                                                "acc = bf16_to_f32(f32_to_bf16(acc + As[ty, k] * Bs[k, tx]))")],
     "rounding inside the loop", None),
    ("no zero fill past the edges: the last K tile keeps the previous tile's values",
     [("            a_val = bf16_to_f32(a[m, k0 + tx])\n        As[ty, tx] = a_val",
       "            As[ty, tx] = bf16_to_f32(a[m, k0 + tx])"),
      ("            b_val = bf16_to_f32(b[k0 + ty, n])\n        Bs[ty, tx] = b_val",
       "            Bs[ty, tx] = bf16_to_f32(b[k0 + ty, n])")], "counted twice", None),
    ("A's tile loaded with ty along K (the B pattern), its guard left on tx",
     [("a_val = bf16_to_f32(a[m, k0 + tx])", "a_val = bf16_to_f32(a[m, k0 + ty])")], "IndexError", OUT_OF_BOUNDS),
]


def test_the_numba_lab_has_five_mistakes():
    assert len(NUMBA_WRONG) >= 5


@pytest.mark.parametrize("what, edits, says, sim_only", NUMBA_WRONG, ids=[w[0][:48] for w in NUMBA_WRONG])
def test_the_grader_fails_a_numba_lab_mistake(what, edits, says, sim_only, capsys):
    from corpus.mutate import mutant
    from cudabook import SIMULATOR
    if sim_only and not SIMULATOR:
        pytest.skip(sim_only)
    wrong = mutant("cudabook.gemm.s02_smem_tiles", "gemm_tiled", edits)
    assert not labs.grade("02_smem_tiles", wrong, track="gemm"), f"'{what}' passed the grader"
    out = capsys.readouterr().out
    print(f"--- 02_smem_tiles: {what}\n{out}")
    assert "FAIL" in out or "raised an error" in out, out
    if not SIMULATOR:
        return                        # the GPU's cases (and TILE = 32) differ: only the verdict is pinned there
    assert says in out, f"'{what}': the message does not point at the mistake:\n{out}"
    hints = [line for line in out.split("\n") if line.startswith("Hint: ") and says not in line]
    named = [h for h in NUMBA_HINTS if any(h in line for line in hints)]
    assert not named, f"'{what}': the message names a cause the data rules out {named}:\n{out}"
