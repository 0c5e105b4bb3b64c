"""Deformable attention rung 03 (2 x 2 x D tiles staged in shared memory): right in the simulator on the grading
cases, at D = 8, 24, 40 and 128 with every vector width, on border-heavy inputs, bit-exact on exact inputs; bad
parameters refused with the rule; an unedited copy of its kernel passes (the learner-style mistakes in its lab
region are cudabook/msda/mistakes.py's, graded in tests/msda/test_msda_mistakes.py); and the kernel compiles for a GPU with 16-byte shared-memory accesses and warp barriers.
"""

import numpy as np
import pytest

from cudabook import SIMULATOR, labs, msda
from cudabook.msda import s03_smem_tiles as s03
from cudabook.check import check_case
from ptxchild import PRELUDE, ptx_in_child
from test_msda_track import exact_case

STAGE = "03_smem_tiles"
KERNEL = "msda_tiles"


def check(args, kernel=None, **params):
    return check_case("msda", lambda p: s03.launch(p, kernel=kernel, **params), args)


def test_it_is_on_the_ladder_between_02_and_04():
    assert msda.stage(3) is s03 and s03.NAME == STAGE
    i = msda.STAGES.index(STAGE)
    assert msda.STAGES[i - 1] == "02_warp_cooperative" and list(msda.STAGES) == sorted(msda.STAGES)
    assert labs.hint(STAGE, track="msda").startswith("tabulate sample j0 + g")


def test_right_on_the_grading_cases():
    for name, args, label in msda.grading_cases(STAGE):
        v = check(args)
        assert v.ok, f"{name} ({label}):\n{v}"


@pytest.mark.parametrize("D", [8, 24, 40, 128])
@pytest.mark.parametrize("vec_bytes", [4, 8, 16])
def test_right_at_these_channel_counts_with_borders(D, vec_bytes):
    """borders=0.3: a third of the coordinates on map edges, pixel centres, one pixel off or far outside. At D = 128
    4-byte vectors make 64 a row: each lane blends two (PER_LANE = 2)."""
    Lq = 2 if D == 128 and SIMULATOR else 5
    args = msda.random_problem(1, Lq, 2, ((3, 5), (2, 2), (1, 1)), 3, D, borders=0.3)
    v = check(args, vec_bytes=vec_bytes)
    assert v.ok, f"D={D}, vec_bytes={vec_bytes}:\n{v}"


def test_right_with_one_warp_a_block_and_uniform_locations():
    """Several blocks, the last one's spare groups doing group 0's work without storing it."""
    args = msda.random_problem(2, 9, 3, ((4, 3), (2, 5)), 2, 16, locations="uniform", borders=0.2)
    v = check(args, warps_per_block=1)
    assert v.ok, str(v)


def test_exact_inputs_come_out_exact():
    """On exact inputs (see test_msda_track.exact_case) the rung gives the reference rounded to bf16, bit for bit,
    at every vector width."""
    args, want = exact_case()
    for vec_bytes in (4, 8, 16):
        got = msda.run(STAGE, *args, vec_bytes=vec_bytes)
        assert np.array_equal(got.view(np.uint16), want), vec_bytes


@pytest.mark.parametrize("D, params, message", [
    (12, {}, "D .* must be a multiple of 8 from 8 to 128, got D = 12"),
    (136, {}, "got D = 136"),
    (16, {"vec_bytes": 32}, "vec_bytes must be one of"),
    (16, {"warps_per_block": 0}, "warps_per_block must be an integer from 1 to 32"),
    (128, {"warps_per_block": 32}, "98,304 bytes of shared memory at D = 128"),
])
def test_bad_parameters_are_refused_with_the_rule(D, params, message):
    args = msda.random_problem(1, 2, 1, ((2, 2),), 1, D)
    with pytest.raises(ValueError, match=message):
        msda.run(STAGE, *args, **params)


def test_an_unknown_parameter_is_refused():
    with pytest.raises(TypeError, match="unknown parameter 'lanes'"):
        msda.run(STAGE, *msda.random_problem(1, 2, 1, ((2, 2),), 1, 8), lanes=4)


def test_a_replacement_kernel_really_runs():
    from numba import cuda

    @cuda.jit
    def writes_nothing(words, shapes, starts, loc, attn, out, lanes):
        pass

    v = check(msda.random_problem(1, 2, 2, ((3, 4), (2, 2)), 2, 8), kernel=writes_nothing)
    assert not v.ok and v.nan == v.total and "no output was written" in v.message


# ------------------------------------------------------------------------------------ learner mistakes

# The lab's planted mistakes (a missing barrier, corners off the map not zeroed, corners or fractions mixed up,
# the wrong table entry or tile slot): cudabook/msda/mistakes.py, graded by tests/msda/test_msda_mistakes.py.


def test_an_unedited_copy_passes():
    from corpus.mutate import mutant
    assert check(msda.random_problem(1, 3, 2, ((3, 4), (2, 2)), 3, 24, borders=0.3),
                 kernel=mutant(s03.__name__, KERNEL)).ok


# ------------------------------------------------------------------------------------ a GPU compiles it

def test_the_solution_passes_the_grader_and_compiles_for_a_gpu(capsys):
    if SIMULATOR:       # grading in the simulator is slow: CI does it once, in the solution notebook
        pytest.skip("in the simulator solutions/msda/03_smem_tiles_SOLUTION.ipynb grades the solution "
                    "(nbval; the repository's conftest.py fails it unless the grader prints PASS)")
    assert labs.grade(STAGE, s03.msda_tiles, track="msda"), capsys.readouterr().out
    out = capsys.readouterr().out


def test_the_kernel_compiles_with_vector_shared_accesses_and_warp_barriers():
    """Numba's real compiler (NVVM, no GPU needed), for sm_90, every specialisation launch() makes: 4-, 8- and
    16-byte vectors, one or two vectors a lane. No float64, no local memory (the sums stay in registers); the
    tile is written and read with st.shared/ld.shared of the vector's width; bar.warp.sync is the barrier."""
    if not SIMULATOR:
        pytest.skip("on a GPU the other tests compile and run the kernel")
    child = PRELUDE + r"""
from cudabook.msda import s03_smem_tiles as s03
from cudabook.kit.numba_rung import specialise
A = lambda t, n: types.Array(t, n, "C")
u32, i32, f32 = types.uint32, types.int32, types.float32
sig = (A(u32, 3), A(i32, 2), A(i32, 1), A(f32, 6), A(f32, 5), A(u32, 3), i32)
out = {}
for words, per in ((1, 1), (1, 2), (2, 1), (4, 1)):
    k = specialise(s03.msda_tiles, WORDS=words, PER_LANE=per, ACC=2 * words * per)
    out[f"{words}/{per}"] = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))[0]
print(json.dumps(out))
"""
    ptx = ptx_in_child(child)
    for name, text in ptx.items():
        assert ".f64" not in text and ".local" not in text, name
        assert "bar.warp.sync" in text and "st.shared" in text and "ld.shared" in text, name
    assert "st.shared.v4.u32" in ptx["4/1"] and "ld.shared.v4.u32" in ptx["4/1"] and "ld.global.v4.u32" in ptx["4/1"]
    assert "st.global.v4.u32" in ptx["4/1"]
    assert "st.shared.v2.u32" in ptx["2/1"] and "ld.shared.v2.u32" in ptx["2/1"]
