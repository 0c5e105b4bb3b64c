"""Deformable attention rung 05 (lane groups, C++ for sm_80+): compiled for a GPU everywhere, run on a CPU by the
emulator, on a GPU for real, with branches and without; its lab's solution region passes the grader (the planted
mistakes, cudabook/msda/mistakes.py, fail it in tests/msda/test_msda_mistakes.py)."""
import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, labs, msda, notebooks, nvrtc
from cudabook.msda import benchmark
from cudabook.msda import s05_lane_groups as s05
from test_msda_tma import HOST_CXX, SHAPES, _case


@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
@pytest.mark.parametrize("vectors", [1, 2])
def test_it_compiles_without_spills(D, levels, P, locations, vectors):
    """Held to 64 registers a thread, the kernel must not spill (2 vectors a lane once did, and slowed): none at the
    benchmark's D = 32, P = 8 (test_the_benchmark_build_does_not_spill). Here, at the test's small shapes, a few
    values parked once are allowed: at D = 40, P = 2 (8 lanes a group, of which one has samples) the compiler stores
    three values and reloads each once, 16 bytes of stack. The kernel is unrolled whole, so every STL and LDL runs
    once a thread; more than a few would be a real spill."""
    cubin = s05.compile_cubin(D=D, L=len(levels), P=P, vectors=vectors)
    used = nvrtc.resource_usage(cubin)[s05.KERNEL]
    parked = nvrtc.sass_lines(cubin, r"\b(STL|LDL)", kernel=s05.KERNEL)
    assert used["local"] == 0 and used["stack"] <= 16 and len(parked) <= 6, (used, parked)


@pytest.mark.parametrize("vectors", [1, 2])
def test_the_benchmark_build_does_not_spill(vectors):
    size = benchmark.WORKLOADS[0]
    cubin = s05.compile_cubin(D=size["D"], L=len(size["levels"]), P=size["P"], vectors=vectors)
    used = nvrtc.resource_usage(cubin)[s05.KERNEL]
    assert used["local"] == 0 and used["stack"] == 0, used
    assert nvrtc.sass_lines(cubin, r"LDG\.E\.(128|CONSTANT\.128)|LDG.*128"), "no 16-byte loads in the SASS"


@pytest.mark.skipif(not HOST_CXX, reason="the emulator needs a host C++ compiler and the simulator's host memory")
# M: the items go two heads at a time when M is even, head by head when it is odd: both orders, both paths
@pytest.mark.parametrize("branchless, vectors, M", [(True, 1, 3), (True, 1, 4), (False, 1, 4), (True, 2, 4),
                                                    (False, 4, 3)])
@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
def test_right_in_the_emulator(D, levels, P, locations, branchless, vectors, M):
    args = _case(D, levels, P, locations, M=M)
    p = msda.upload(*args)
    p.poison()
    with emulate.emulating():
        s05.launch(p, threads=64, branchless=branchless, vectors=vectors)
    verdict = msda.judge(p.result(), *args)
    assert verdict.ok, verdict


@pytest.mark.gpu
@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
def test_right_on_a_gpu(D, levels, P, locations):
    why = s05.unavailable()
    if why:
        pytest.skip(why)
    for seed in range(2):
        args = _case(D, levels, P, locations, seed, M=3 + seed)   # head by head, then two heads at a time
        for params in ({}, {"threads": 64, "branchless": False}, {"vectors": 2}, {"vectors": 4, "threads": 512}):
            verdict = msda.judge(msda.run("05", *args, **params), *args)
            assert verdict.ok, (params, verdict)


def _region():
    return notebooks.strip_markers(notebooks.region_source(str(s05.SOURCE.relative_to(notebooks.PACKAGE))))


@pytest.mark.skipif(SIMULATOR and not HOST_CXX, reason="no host C++ compiler for the emulator")
def test_the_solution_region_passes(capsys):
    assert labs.grade("05", _region(), track="msda"), capsys.readouterr().out


def test_bad_sizes_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="at most 8 levels"):
        s05.config(32, 9, 4)
    with pytest.raises(ValueError, match="threads"):
        s05.config(32, 4, 4, threads=100)
    with pytest.raises(ValueError, match="vectors .16-byte vectors a lane. must be 1, 2 or 4, got 3"):
        s05.config(32, 4, 4, vectors=3)
    assert s05.group_lanes(32, 2) == 2 and s05.group_lanes(40, 2) == 4 and s05.group_lanes(128, 4) == 4


def test_a_pixel_row_too_wide_for_a_32_bit_pitch_is_refused():
    class Huge:                     # only the shape is read before the refusal
        shape = (1, 4, 2 ** 24, 128, 1, 1, 1)
    with pytest.raises(ValueError, match=r"M \* D = 16777216 x 128 bf16 \(4,294,967,296 bytes.*below 2\*\*31"):
        s05.launch(Huge())


def test_a_pyramid_too_large_for_the_packed_row_is_refused():
    class Huge:                     # only the shape is read before the refusal
        shape = (1, 2 ** 29, 8, 32, 1, 1, 1)
    with pytest.raises(ValueError, match=r"S = 536,870,912 pixels .*value\[N, S, M, D\].*below 2\*\*29"):
        s05.launch(Huge())


def test_too_many_threads_for_32_bit_item_numbers_are_refused():
    class Huge:                     # only the shape is read before the refusal
        shape = (64, 1000, 8, 32, 2 ** 20, 4, 8)
    with pytest.raises(ValueError, match=r"N \* Lq \* M = 64 x 1048576 x 8 items of 4 lanes .*below 2\*\*31"):
        s05.launch(Huge())


@pytest.mark.parametrize("D, L, P, vectors", [(32, 4, 8, 1), (40, 3, 6, 1), (32, 4, 8, 2)])   # P even
def test_the_rung_is_the_edit_it_adopted(D, L, P, vectors):
    """Rung 05 took msda05_sample_pairs by hand (each lane works out two samples of a round of 2G and hands them on
    in five shuffles each; at even P their locations come in one 16-byte load), as it had taken head_pairs_packed32
    and heads_outer_wide before: its SASS is the edit's, applied to the kernel at the edit's BASE, opcode for
    opcode, at even P (at odd P the rung loads a pair's two locations apart, where the edit keeps the rounds of G).
    (A 64-bit pitch product once slipped into an adoption: about 530 more instructions a lane, timed and recorded
    before it was seen.)"""
    from cudabook import edits
    edit = edits.load("msda05_sample_pairs")
    try:
        edited = edits.edited_source(edit)
    except RuntimeError as e:                   # a copy without the project's history
        pytest.skip(str(e))
    def strip(cubin):                           # the opcodes (a multiply's operands may come in either order)
        return [i.split()[0] for i in nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL) if not i.startswith("NOP")]
    size = dict(D=D, L=L, P=P, vectors=vectors, threads=512)
    assert strip(s05.compile_cubin(source_text=edited, **size)) == strip(s05.compile_cubin(**size))

