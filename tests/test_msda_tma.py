"""Deformable attention rung 04 (TMA boxes, sm_90a): compiled for Hopper everywhere, run on a CPU by the
emulator (copies landing late and early), and on a Hopper GPU for real; planted mistakes in its lab region."""
import shutil

import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, labs, msda, notebooks, nvrtc
from cudabook.msda import inputs
from cudabook.msda import s04_tma_boxes as s04

HOST_CXX = bool(shutil.which("g++") or shutil.which("clang++")) and SIMULATOR   # the emulator: host memory
SHAPES = [  # (D, levels, P, locations): every group width of the consumers (D/2 words: 4, 8, 12, 20, 64)
    (8, [(4, 4)], 2, "uniform"),
    (16, [(5, 7), (3, 4)], 3, "local"),
    (24, [(3, 5), (2, 2)], 5, "local"),
    (40, [(6, 5), (3, 3), (2, 2)], 2, "local"),
    (128, [(3, 3)], 4, "uniform"),
]


def _case(D, levels, P, locations, seed=0):
    return inputs.random_problem(2, 23, 3, levels, P, D, locations=locations, borders=0.2,
                                 rng=np.random.default_rng(seed))


@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
def test_it_compiles_for_hopper_with_one_tma_load_and_no_spills(D, levels, P, locations):
    cubin = s04.compile_cubin(D=D, L=len(levels), P=P)
    assert nvrtc.sass_lines(cubin, "UTMALDG"), "no TMA load in the SASS"
    assert nvrtc.resource_usage(cubin)[s04.KERNEL]["local"] == 0


@pytest.mark.skipif(not HOST_CXX, reason="the emulator needs a host C++ compiler and the simulator's host memory")
@pytest.mark.parametrize("landing", ["lazy", "eager"])
@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
def test_right_in_the_emulator(D, levels, P, locations, landing):
    args = _case(D, levels, P, locations)
    p = msda.upload(*args)
    p.poison()
    with emulate.emulating(landing):
        s04.launch(p, blocks=3, consumer_warps=2, depth=2)     # a ring deeper than its consumer warps
    verdict = msda.judge(p.result(), *args)
    assert verdict.ok, verdict


@pytest.mark.hopper
@pytest.mark.parametrize("D, levels, P, locations", SHAPES + [(32, inputs.SEED_LEVELS, 8, "local")])
def test_right_on_a_hopper_gpu(D, levels, P, locations):
    why = s04.unavailable()
    if why:
        pytest.skip(why)
    for seed in range(2):
        args = _case(D, levels, P, locations, seed)
        for params in ({}, {"blocks": 5, "consumer_warps": 4, "depth": 2}, {"consumer_warps": 1, "depth": 1}):
            out = msda.run("04", *args, **params)
            verdict = msda.judge(out, *args)
            assert verdict.ok, (params, verdict)


def test_more_than_eight_levels_is_refused_with_the_rule():
    with pytest.raises(ValueError, match="at most 8 levels"):
        s04.config(32, 9, 4)


def _region():
    return notebooks.strip_markers(notebooks.region_source(str(s04.SOURCE.relative_to(notebooks.PACKAGE))))


MISTAKES = [  # (what, old, new, words in the message)
    ("the bytes of the boxes' slots, not of the boxes (BOX_STRIDE)", "(uint32_t)boxes * BOX_BYTES",
     "(uint32_t)boxes * BOX_STRIDE", ["expect_tx says", "deliver"]),
    ("a byte count for every sample, on the map or not", "(uint32_t)boxes * BOX_BYTES", "(uint32_t)LP * BOX_BYTES",
     ["expect_tx says", "deliver"]),
    ("no expect_tx: lane 0 only arrives", "if (lane == 0) mbar_expect_tx(full, (uint32_t)boxes * BOX_BYTES);",
     "if (lane == 0) mbar_arrive(full);", ["expect_tx says 0 bytes"]),
    ("x0 and y0 swapped in the box's coordinates", "0, m, x0s[r], y0s[r], n", "0, m, y0s[r], x0s[r], n", ["FAIL"]),
    ("the head left out of the coordinates (always head 0)", "0, m, x0s[r], y0s[r], n", "0, 0, x0s[r], y0s[r], n",
     ["FAIL"]),
    ("lane 0 arrives twice, another lane never", "if (lane != 0) mbar_arrive(full);", "mbar_arrive(full);",
     ["more arrivals"]),
]


@pytest.mark.skipif(SIMULATOR and not HOST_CXX, reason="no host C++ compiler for the emulator")
def test_the_solution_region_passes(capsys):
    if not s04.unavailable():
        pytest.skip("this machine runs the stage: the GPU grades it")
    assert labs.grade("04", _region(), track="msda"), capsys.readouterr().out


@pytest.mark.skipif(SIMULATOR and not HOST_CXX, reason="no host C++ compiler for the emulator")
@pytest.mark.parametrize("what, old, new, words", MISTAKES, ids=[m[0][:40] for m in MISTAKES])
def test_a_lab_mistake_fails(what, old, new, words, capsys):
    if not SIMULATOR and ("FAIL" not in words):
        pytest.skip("on a GPU a barrier that never completes ends in the watchdog's trap, which ends the CUDA "
                    "context for the whole process: the emulator tests it")
    region = _region()
    assert old in region
    assert not labs.grade("04", region.replace(old, new, 1), track="msda"), f"'{what}' passed"
    out = capsys.readouterr().out
    if SIMULATOR:      # (on a GPU a wrong byte count is a trap after the watchdog's time: the verdict is FAIL)
        assert all(w in out for w in words), out
