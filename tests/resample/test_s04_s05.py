"""Stages 04 (shared-memory windows, persistent grid) and 05 (double buffering: buffers="registers", the
default, and buffers="shared") against the reference.

In the simulator the launch parameters are shrunk (2 warps a block, runs of 8 targets, windows of 12 rows,
chunks of 16 channels) so that the small problems still exercise every path: 16-, 8- and 4-byte loads, several
channel chunks with a partial last one, runs that fit their window and runs that do not (the per-target
fallback), unsorted targets, and blocks that loop over many work items.
"""
import importlib
import pathlib

import numpy as np
import pytest

from cudabook import SIMULATOR, resample
from cudabook.resample import checking as check
from cudabook.resample import s04_smem_windows as s04
from cudabook.resample import s05_double_buffered as s05



class S05Shared:
    """Stage 05 with two shared-memory windows (buffers="shared"), as a stage of its own for these tests."""
    NAME = s05.NAME

    @staticmethod
    def launch(p, **params):
        s05.launch(p, buffers="shared", **params)


STAGES = [s04, s05, S05Shared]
IDS = ["04", "05", "05-shared"]
WINDOWED = [s04, S05Shared]          # the stages with windows, work items and a fallback
WINDOWED_IDS = ["04", "05-shared"]
SIM = dict(threads=64, targets_per_block=8, window_rows=12, chunk_cols=16)

CASES = [  # B, S, T, D, sorted, parameters beyond SIM, what it covers
    (2, 19, 40, 16, True, {}, "16-byte loads, one chunk"),
    (2, 19, 40, 24, True, {}, "two chunks, the second half full (D = 24, 16 channels a chunk)"),
    (1, 23, 30, 21, True, {}, "odd D, two chunks (16 + 5 channels)"),
    (2, 13, 30, 6, True, {}, "D even but not a multiple of 4: 4-byte loads"),
    (1, 13, 30, 12, True, {}, "D a multiple of 4 but not of 8: 8-byte loads"),
    (1, 19, 30, 16, True, {"vec_bytes": 4}, "vec_bytes = 4 where 16 would do"),
    (1, 2, 20, 1, True, {}, "S = 2, D = 1"),
    (2, 13, 30, 5, False, {}, "unsorted targets: every work item takes the per-target path"),
    (1, 9, 0, 4, True, {}, "T = 0"),
    (2, 19, 40, 8, True, {"blocks": 1}, "one block loops over every work item"),
    (1, 19, 70, 4, True, {"targets_per_block": 2, "blocks": 1},
     "one block, 35 work items: more than a batch of run bounds (32)"),
    (1, 30, 50, 4, True, {"threads": 32, "targets_per_block": 40, "window_rows": 48},
     "more targets in a run and rows in a window than threads"),
    (1, 2100, 9, 6, True, {}, "S = 2100: the 05 prepass searches global memory (times too long for its block)"),
    (3, 11, 7, 300, True, {"blocks": 2}, "B * T = 21 targets, not a multiple of 4; rows wider than a warp's 16 bytes"),
]


@pytest.mark.parametrize("stage", STAGES, ids=IDS)
@pytest.mark.parametrize("B,S,T,D,is_sorted,extra,what", CASES, ids=[c[-1] for c in CASES])
def test_random(stage, B, S, T, D, is_sorted, extra, what):
    v = check.check_launch(stage.launch, B, S, T, D, sorted_targets=is_sorted, **{**SIM, **extra})
    assert v.ok, f"{stage.NAME}, {what}:\n{v}"


def work_items_that_fit(src_times, tgt_times, tpb, wrows):
    """(runs whose window fits, runs that fall back), counted the way the kernels decide (sorted targets)."""
    S = src_times.shape[1]
    fit = wide = 0
    for b in range(src_times.shape[0]):
        lo = np.clip(np.searchsorted(src_times[b], tgt_times[b], side="right") - 1, 0, S - 2)
        for t0 in range(0, len(lo), tpb):
            span = lo[min(t0 + tpb, len(lo)) - 1] + 2 - lo[t0]
            fit += span <= wrows
            wide += span > wrows
    return fit, wide


@pytest.mark.parametrize("stage", WINDOWED, ids=WINDOWED_IDS)
def test_window_too_wide(stage):
    """window_rows = 4 with few targets spread over many source rows: no run fits, all fall back."""
    st, sf, tt = resample.random_problem(1, 60, 6, 4, rng=1)
    assert work_items_that_fit(st, tt, 8, 4) == (0, 1)
    v = check.check_on(stage.launch, st, sf, tt, **{**SIM, "window_rows": 4})
    assert v.ok, str(v)


@pytest.mark.parametrize("stage", WINDOWED, ids=WINDOWED_IDS)
def test_some_runs_fit_and_some_fall_back(stage):
    """Both paths in one launch, in the same blocks (2 blocks, 10 work items)."""
    st, sf, tt = resample.random_problem(1, 40, 40, 8, rng=2)
    fit, wide = work_items_that_fit(st, tt, 4, 6)
    assert fit >= 2 and wide >= 2, (fit, wide)
    v = check.check_on(stage.launch, st, sf, tt, **{**SIM, "targets_per_block": 4, "window_rows": 6, "blocks": 2})
    assert v.ok, str(v)


@pytest.mark.parametrize("stage", STAGES, ids=IDS)
def test_targets_on_knots_and_outside_the_range(stage):
    st, sf, _ = resample.random_problem(2, 8, 1, 6, rng=3)
    tt = np.concatenate([st[:, :1] - 5, st[:, :1] - 1, st, (st[:, :-1] + st[:, 1:]) / 2, st[:, -1:] + 2],
                        axis=1).astype(np.float32)
    tt.sort(axis=1)
    v = check.check_on(stage.launch, st, sf, tt, **SIM)
    assert v.ok, str(v)
    out = resample.run(stage.NAME, st, sf, tt, **SIM, **({"buffers": "shared"} if stage is S05Shared else {}))
    on_knots = np.isin(tt[0], st[0])
    assert np.array_equal(out[0, on_knots].view(np.uint16), sf[0].view(np.uint16))   # exact knots: exact values


@pytest.mark.parametrize("stage", STAGES, ids=IDS)
def test_parameters_are_checked(stage):
    st, sf, tt = resample.random_problem(1, 5, 4, 512)
    p = resample.upload(st, sf, tt)
    if stage is not s05:
        with pytest.raises(ValueError, match="shared memory"):
            stage.launch(p, window_rows=200, chunk_cols=512)
    else:
        with pytest.raises(ValueError, match="buffers must be"):
            stage.launch(p, buffers="double")
    with pytest.raises(ValueError, match="multiple of 32"):
        stage.launch(p, threads=48)
    with pytest.raises(ValueError, match="vec_bytes"):
        stage.launch(p, vec_bytes=2)


def test_stage_contract():
    for stage, name in ((s04, "04_smem_windows"), (s05, "05_double_buffered")):
        assert stage.NAME == name and stage.NAME in resample.STAGES and stage.TITLE
        assert set(stage.PARAMS) <= set(stage.launch.__code__.co_varnames)
        text = pathlib.Path(stage.__file__).read_text()
        assert text.count("# >>> lab:") == 1 and text.count("# <<< lab") == 1


# The planted wrong kernels of tests/corpus/ for these stages run the stage's launch with small parameters:
# the stage's own kernel must pass with the same sizes and parameters (test_corpus.py checks that the wrong
# ones fail).
MINE = sorted(p.stem for p in (pathlib.Path(__file__).parents[1] / "corpus").glob("wrong_0[45]_*.py"))


@pytest.mark.parametrize("name", MINE)
def test_correct_kernel_passes_where_the_planted_bug_fails(name):
    module = importlib.import_module(f"corpus.{name}")
    stage = s04 if name.startswith("wrong_04") else s05
    size = module.SIZE if SIMULATOR else getattr(module, "GPU_SIZE", dict(B=4, S=700, T=2000, D=67))
    v = check.check_launch(lambda p: stage.launch(p, **module.PARAMS), **size,
                           sorted_targets=getattr(module, "SORTED", True))
    assert v.ok, f"{name}: {v}"


# ----------------------------------------------------------------------------------------------------------
# On a GPU: the default launch parameters, larger sizes, and the benchmark size once
# ----------------------------------------------------------------------------------------------------------
GPU_CASES = [(3, 777, 1500, 1, True), (3, 777, 1500, 7, False), (3, 777, 1500, 64, True),
             (3, 777, 1500, 129, True), (3, 777, 1500, 256, False), (3, 777, 1500, 256, True),
             (3, 1500, 777, 260, True), (5, 64, 3000, 1024, True), (2, 9000, 500, 16, True)]


@pytest.mark.gpu
@pytest.mark.parametrize("stage", STAGES, ids=IDS)
@pytest.mark.parametrize("B,S,T,D,is_sorted", GPU_CASES)
def test_gpu_sizes(stage, B, S, T, D, is_sorted):
    v = check.check_launch(stage.launch, B, S, T, D, sorted_targets=is_sorted)
    assert v.ok, str(v)


@pytest.mark.gpu
@pytest.mark.parametrize("stage", STAGES, ids=IDS)
@pytest.mark.parametrize("params", [dict(targets_per_block=16, window_rows=8), dict(blocks=5),
                                    dict(vec_bytes=8), dict(vec_bytes=4, threads=256), dict(threads=64)])
def test_gpu_parameters(stage, params):
    v = check.check_launch(stage.launch, 3, 777, 1500, 256, **params)
    assert v.ok, str(v)


@pytest.mark.gpu
@pytest.mark.parametrize("stage", STAGES, ids=IDS)
def test_gpu_benchmark_size(stage):
    v = check.check_launch(stage.launch, 64, 4096, 4096, 256)
    assert v.ok, str(v)


# Cases that make the window fill and the prepass's row copy run past what the other cases reach (they kill
# mutants that survived the suite: fill_rest's loop turned into an if, and the copy's eighth store dropped).
def test_a_window_larger_than_one_pass_of_the_block():
    """threads=32 load UNROLL (8) x 32 = 256 window elements a pass; a 40-row x 8-vector window needs two."""
    params = dict(threads=32, targets_per_block=16, window_rows=40, chunk_cols=64, blocks=1)   # one block: 05
    for stage, extra in ((s04, {}), (s05, {"buffers": "shared"})):                              # prefetches too
        v = check.check_launch(stage.launch, 1, 300, 140, 64, **params, **extra)
        assert v.ok, f"{stage.NAME}: {v}"


def test_a_prepass_row_longer_than_seven_passes_of_the_block():
    """The prepass copies a row of S source times with eight loads a thread in flight; S = 250 > 7 x 32 threads
    (the simulator's prepass block) needs the eighth."""
    if not SIMULATOR:
        pytest.skip("the GPU's prepass block has 256 threads; the benchmark size covers it there")
    v = check.check_launch(s05.launch, 1, 250, 40, 8)
    assert v.ok, str(v)
