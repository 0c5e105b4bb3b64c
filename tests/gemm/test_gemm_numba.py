"""GEMM rungs 01-03 (Numba): right on ragged shapes, parameters checked, a learner's kernel accepted, bad
inputs refused with a message that names the rule, and every planted mistake in tests/corpus/gemm_wrong_*.py
caught with a message that points at it. In the simulator on tiny shapes; on a GPU at the GPU cases, 4096^3
for rung 03, and rung 03's registers checked for local memory.
"""
import importlib
import pathlib

import numpy as np
import pytest

from cudabook import SIMULATOR, gemm
from cudabook.check import check_case
from cudabook.simrace import SharedRace

NUMBA_STAGES = ("01_naive", "02_smem_tiles", "03_register_blocking")
KERNELS = {"01_naive": "gemm_naive", "02_smem_tiles": "gemm_tiled", "03_register_blocking": "gemm_blocked"}
# 16-byte path of rung 03 (K and N multiples of 8), more than one K tile, ragged M
VECTOR_CASE = (20, 40, 32) if SIMULATOR else (1000, 520, 776)
CORPUS = sorted(p.stem for p in (pathlib.Path(__file__).parents[1] / "corpus").glob("gemm_wrong_0[123]_*.py"))


def check(stage, M, N, K, kernel=None, **params):
    a, b = gemm.random_problem(M, N, K)
    launch = gemm.stage(stage).launch
    return check_case("gemm", lambda p: launch(p, kernel=kernel, **params), (a, b))


@pytest.mark.parametrize("stage", NUMBA_STAGES)
def test_right_on_the_ragged_cases(stage):
    for name, M, N, K in gemm.cases():
        v = check(stage, M, N, K)
        assert v.ok, f"{stage}, {name} (M={M}, N={N}, K={K}):\n{v}"


def test_run_returns_bf16_of_the_right_shape():
    a, b = gemm.random_problem(3, 5, 7)
    c = gemm.run("01_naive", a, b)
    assert c.shape == (3, 5) and c.dtype == gemm.BF16
    assert gemm.judge(c, a, b).ok


def test_exact_products_come_out_exact():
    """Small integers: every product and every partial sum is exact, so C must equal the reference bit for bit."""
    rng = np.random.default_rng(1)
    a = gemm.to_bf16(rng.integers(-3, 4, size=(9, 13)))
    b = gemm.to_bf16(rng.integers(-3, 4, size=(13, 10)))
    want = gemm.to_bf16(gemm.reference(a, b)).view(np.uint16)
    for stage in NUMBA_STAGES:
        assert np.array_equal(gemm.run(stage, a, b).view(np.uint16), want), stage


def test_rung_03_vector_path_and_several_k_tiles():
    v = check("03_register_blocking", *VECTOR_CASE)
    assert v.ok, str(v)


@pytest.mark.parametrize("params", [dict(tile=8), dict(tile=5)] if SIMULATOR else
                         [dict(tile=8), dict(tile=16), dict(tile=7)])
def test_rung_02_other_tile_sizes(params):
    v = check("02_smem_tiles", 17, 33, 20, **params)
    assert v.ok, f"{params}: {v}"


@pytest.mark.parametrize("params", [dict(tm=4, tn=4), dict(bm=16, bn=16, bk=16, tm=4, tn=8),
                                    dict(bm=64, bn=32, bk=8, tm=8, tn=4)])
def test_rung_03_other_blockings(params):
    for M, N, K in ((17, 33, 20), VECTOR_CASE):
        v = check("03_register_blocking", M, N, K, **params)
        assert v.ok, f"{params} at {(M, N, K)}: {v}"


def test_rung_01_other_block_shapes():
    v = check("01_naive", 17, 33, 20, threads_x=5, threads_y=3)
    assert v.ok, str(v)


# ----------------------------------------------------------------------------------------------------------
# Parameters and inputs
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stage", NUMBA_STAGES)
def test_unknown_parameter_is_a_type_error_naming_it(stage):
    a, b = gemm.random_problem(2, 3, 4)
    with pytest.raises(TypeError, match="'tile_size'"):
        gemm.run(stage, a, b, tile_size=8)


@pytest.mark.parametrize("stage,params,rule", [
    ("01_naive", dict(threads_x=64, threads_y=32), "1024"),
    ("02_smem_tiles", dict(tile=0), "tile must be an integer"),
    ("02_smem_tiles", dict(tile=33), "tile must be an integer in 1..32"),
    ("03_register_blocking", dict(tm=3), "tm must be even"),
    ("03_register_blocking", dict(bm=100), "bm must be a multiple of tm"),
    ("03_register_blocking", dict(bk=12), "bk and bn must be multiples of 8"),
    ("03_register_blocking", dict(bm=256, bn=256, bk=32), "shared memory"),
    ("03_register_blocking", dict(tm=2, tn=4, bm=128, bn=128), "at most 1024"),
])
def test_bad_parameter_values_name_the_rule(stage, params, rule):
    a, b = gemm.random_problem(2, 3, 4)
    with pytest.raises(ValueError, match=rule):
        gemm.run(stage, a, b, **params)


BAD_INPUTS = [
    ("wrong dtype", lambda a, b: (a.astype(np.float32), b), TypeError, "a must be bfloat16, got float32"),
    ("1-D a", lambda a, b: (a[0], b), ValueError, "a must be 2-D"),
    ("K mismatch", lambda a, b: (a, b[:-1]), ValueError, "K must agree"),
    ("a list", lambda a, b: (a.tolist(), b), TypeError, "a must be a NumPy array"),
    ("M = 0", lambda a, b: (a[:0], b), ValueError, r"M \(rows of a\) is 0"),
    ("N = 0", lambda a, b: (a, b[:, :0]), ValueError, r"N \(columns of b\) is 0"),
]


@pytest.mark.parametrize("what,make,error,message", BAD_INPUTS, ids=[w for w, *_ in BAD_INPUTS])
def test_bad_inputs_are_refused_with_the_rule(what, make, error, message):
    a, b = gemm.random_problem(3, 4, 5)
    a, b = make(a, b)
    for stage in NUMBA_STAGES:
        with pytest.raises(error, match=message):
            gemm.run(stage, a, b)


# ----------------------------------------------------------------------------------------------------------
# A learner's kernel, and planted mistakes (mutations of the stages' own source)
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stage", NUMBA_STAGES)
def test_a_replacement_kernel_is_used(stage):
    """kernel= runs the given kernel: an unedited copy of the stage's own passes, and the stage's launch
    compiles it for the launch's constants (tile sizes) too."""
    from corpus.mutate import mutant
    module = gemm.stage(stage)
    copy = mutant(module.__name__, KERNELS[stage])
    assert copy is not getattr(module, KERNELS[stage])
    v = check(stage, 17, 33, 20, kernel=copy)
    assert v.ok, str(v)
    if stage == "02_smem_tiles":
        v = check(stage, 17, 33, 20, kernel=copy, tile=8)
        assert v.ok, str(v)


def test_a_replacement_kernel_really_runs():
    """A kernel that writes nothing leaves C poisoned: the launch did not fall back to the stage's own."""
    from numba import cuda

    @cuda.jit
    def does_nothing(a, b, c):
        pass

    for stage in NUMBA_STAGES:
        v = check(stage, 5, 6, 7, kernel=does_nothing)
        assert not v.ok and v.nan == v.total, stage


def _catch(module):
    """The failure message for one attempt at a planted mistake, or None if it passed."""
    M, N, K = getattr(module, "CASE", (17, 33, 20) if SIMULATOR else (333, 517, 200))
    a, b = gemm.random_problem(M, N, K)
    try:
        v = check_case("gemm", module.launch, (a, b))
    except IndexError as e:          # the simulator checks every index
        return f"raised IndexError: {e}"
    except SharedRace as e:          # ... and every shared-memory access against the barriers (cudabook.simrace)
        return f"raised SharedRace: {e}"
    return None if v.ok else v.message


@pytest.mark.parametrize("name", CORPUS)
def test_the_checker_catches_the_planted_mistake(name):
    module = importlib.import_module(f"corpus.{name}")
    if getattr(module, "SIM_ONLY", None) and not SIMULATOR:
        pytest.skip(f"{name}: {module.SIM_ONLY}")
    for _ in range(3):
        caught = _catch(module)
        if caught:
            print(f"{name} ({module.BUG}):\n{caught}")
            assert module.EXPECT in caught, f"{name}: the message does not point at the mistake:\n{caught}"
            return
    pytest.fail(f"the checker let a wrong kernel pass three times: {name}: {module.BUG}")


def test_every_numba_rung_has_planted_mistakes():
    for stage in NUMBA_STAGES:
        assert any(n.startswith(f"gemm_wrong_{stage[:2]}_") for n in CORPUS), stage


# ----------------------------------------------------------------------------------------------------------
# GPU only
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_rung_03_at_4096():
    v = check("03_register_blocking", 4096, 4096, 4096)
    assert v.ok, str(v)


@pytest.mark.gpu
def test_rung_03_keeps_its_accumulators_in_registers():
    """No local memory: the PTX declares no local depot, for the 16-byte path and the element-by-element one."""
    from cudabook.gemm import s03_register_blocking as s03
    for vec in (True, False):
        ptx = s03.ptx(vec=vec)
        assert ".local" not in ptx, f"vec={vec}: local memory in rung 03's PTX"
        assert ("ld.global.v4.u32" in ptx) == vec and "ld.shared.v4.f32" in ptx
