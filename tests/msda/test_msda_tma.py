"""Deformable attention rung 04 (TMA boxes, sm_90a): compiled for Hopper everywhere, run on a CPU by the
emulator (copies landing late and early), and on a Hopper GPU for real; its lab's solution region passes (its
planted mistakes: cudabook/msda/mistakes.py, graded in tests/msda/test_msda_mistakes.py)."""
import os
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


def _case(D, levels, P, locations, seed=0, M=3):
    return inputs.random_problem(2, 23, M, levels, P, D, locations=locations, borders=0.2,
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


@pytest.mark.skipif(not HOST_CXX, reason="the emulator needs a host C++ compiler and the simulator's host memory")
@pytest.mark.parametrize("D, levels, P, locations", SHAPES[:3])
def test_the_strided_item_order_is_right_in_the_emulator(D, levels, P, locations):
    args = _case(D, levels, P, locations)
    p = msda.upload(*args)
    p.poison()
    with emulate.emulating("lazy"):
        s04.launch(p, blocks=4, consumer_warps=2, depth=2, strided=True)   # 4 blocks: items per block 34 or 35
    verdict = msda.judge(p.result(), *args)
    assert verdict.ok, verdict


STORE = ("                    if (j < W2) out[item * W2 + j] = pack_bf16x2(acc_lo[u], acc_hi[u]);\n"
         "                }\n            }\n")   # the consumers' store, at the end of an item


@pytest.mark.skipif(not HOST_CXX, reason="the emulator needs a host C++ compiler and the simulator's host memory")
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("blocks", [4, 7, 138])
def test_each_item_is_done_once_by_the_block_its_order_gives_it(blocks, strided):
    # the kernel, instrumented: once its lanes have stored an item, lane 0 writes into the item's first word the
    # block that did it, and into the second how many times it has been done; the output alone would not tell
    # the two orders apart, nor an item done twice
    assert s04.source().count(STORE) == 1
    text = s04.source().replace(STORE, STORE + "            __syncwarp();\n            if (lane == 0) { out[item * W2] "
                                "= 0x7F000000u + blockIdx.x; out[item * W2 + 1] = atomicAdd(&times_done[item], 1u) + 1; }\n")
    text = text.replace('#include "hopper.cuh"', f'#include "hopper.cuh"\n__device__ unsigned int times_done[1024];  '
                        f'// build {blocks} {strided} {os.getpid()}')       # a build of its own: the counts start at 0
    args = _case(16, [(5, 7), (3, 4)], 3, "local")
    p = msda.upload(*args)
    with emulate.emulating("lazy"):
        s04.launch(p, kernel=text, blocks=blocks, consumer_warps=2, depth=2, strided=strided)
    words = p.out.copy_to_host().view(np.uint32).reshape(-1, 8)            # D = 16: 8 words an item
    items = words.shape[0]                                                   # N * Lq * M = 138
    owner = (words[:, 0] - 0x7F000000).tolist()
    want = [i % blocks if strided else max(b for b in range(blocks) if items * b // blocks <= i)
            for i in range(items)]
    assert owner == want
    assert (words[:, 1] == 1).all(), "an item written more than once"


@pytest.mark.hopper
@pytest.mark.parametrize("D, levels, P, locations", SHAPES + [(32, inputs.SEED_LEVELS, 8, "local")])
def test_right_on_a_hopper_gpu(D, levels, P, locations):
    why = s04.unavailable()
    if why:
        pytest.skip(why)
    for seed in range(2):
        args = _case(D, levels, P, locations, seed)
        for params in ({}, {"blocks": 5, "consumer_warps": 4, "depth": 2}, {"consumer_warps": 1, "depth": 1},
                       {"strided": True}, {"blocks": 5, "consumer_warps": 4, "depth": 2, "strided": True}):
            out = msda.run("04", *args, **params)
            verdict = msda.judge(out, *args)
            assert verdict.ok, (params, verdict)


def test_more_than_eight_levels_is_refused_with_the_rule():
    with pytest.raises(ValueError, match="at most 8 levels"):
        s04.config(32, 9, 4)


def test_strided_is_a_bool():
    with pytest.raises(ValueError, match="strided is True or False"):
        s04.config(32, 4, 4, strided=1)


def _region():
    return notebooks.strip_markers(notebooks.region_source(str(s04.SOURCE.relative_to(notebooks.PACKAGE))))


@pytest.mark.skipif(SIMULATOR and not HOST_CXX, reason="no host C++ compiler for the emulator")
def test_the_solution_region_passes(capsys):
    if not s04.unavailable():
        pytest.skip("this machine runs the stage: the GPU grades it")
    assert labs.grade("04", _region(), track="msda"), capsys.readouterr().out

