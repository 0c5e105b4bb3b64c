"""Deformable attention rung 05 (lane groups, C++ for sm_80+): compiled for a GPU everywhere, run on a CPU by the
emulator, on a GPU for real, with branches and without; its lab's solution region passes the grader (the planted
mistakes, cudabook/msda/mistakes.py, fail it in tests/msda/test_msda_mistakes.py)."""
import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, labs, msda, notebooks, nvrtc
from cudabook.msda import s05_lane_groups as s05
from test_msda_tma import HOST_CXX, SHAPES, _case


@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
@pytest.mark.parametrize("vectors", [1, 2])
def test_it_compiles_without_spills(D, levels, P, locations, vectors):
    cubin = s05.compile_cubin(D=D, L=len(levels), P=P, vectors=vectors)
    used = nvrtc.resource_usage(cubin)[s05.KERNEL]
    assert used["local"] == 0 and used["stack"] == 0, used      # (held to 64 registers, 2 vectors a lane spilled)
    assert nvrtc.sass_lines(cubin, r"LDG\.E\.(128|CONSTANT\.128)|LDG.*128"), "no 16-byte loads in the SASS"


@pytest.mark.skipif(not HOST_CXX, reason="the emulator needs a host C++ compiler and the simulator's host memory")
@pytest.mark.parametrize("branchless, vectors", [(True, 1), (False, 1), (True, 2), (False, 4)])
@pytest.mark.parametrize("D, levels, P, locations", SHAPES)
def test_right_in_the_emulator(D, levels, P, locations, branchless, vectors):
    args = _case(D, levels, P, locations)
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
        args = _case(D, levels, P, locations, seed)
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


def test_the_rung_is_the_edit_it_adopted():
    """Rung 05 took heads_outer_wide's three edits by hand (items head by head, one multiply-add an address,
    registers held to 64): its SASS is the edit's, applied to the kernel at the edit's BASE, opcode for
    opcode. (A 64-bit pitch product once slipped in: about 530 more instructions a lane, timed and
    recorded before it was seen.)"""
    from cudabook import edits
    edit = edits.load("msda05_heads_outer_wide")
    try:
        edited = edits.edited_source(edit)
    except RuntimeError as e:                   # a copy without the project's history
        pytest.skip(str(e))
    def strip(cubin):                           # the opcodes (a multiply's operands may come in either order)
        return [i.split()[0] for i in nvrtc.sass_lines(cubin, ".", kernel=s05.KERNEL) if not i.startswith("NOP")]
    assert strip(s05.compile_cubin(threads=512, source_text=edited)) == strip(s05.compile_cubin(threads=512))

