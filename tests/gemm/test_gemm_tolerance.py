"""The GEMM tolerance against the arithmetic of the tensor cores (cudabook/gemm/inputs.py derives it).

A NumPy model of how rungs 04 to 07 add: the products a_ik b_kj are exact (float64 holds them exactly), and
each k16 step (mma.sync m16n8k16, wgmma k16) adds 16 of them to the float32 accumulator by aligning every term
to the largest exponent among the 16 products and the accumulator and cutting at the 24-bit grid of that term
(round toward zero), then truncating the sum to 24 bits. Run at every size the graders use and at the
benchmark's K = 8192, rounded once to bf16, it must pass the judge the grader uses; the same model with one
product left out, or one k16 step left out, must fail. A plain float32 sum rounded to nearest passes too.
"""
import ml_dtypes
import numpy as np
import pytest

from cudabook import track
from cudabook.gemm import checking, inputs

BF16 = ml_dtypes.bfloat16
STEP = 16                        # products per tensor-core step: the k of mma.sync m16n8k16 and of wgmma


def _graders_sizes():
    """Every (M, N, K) the graders and the checker use: the GPU's cases, the simulator's and each stage's own."""
    sizes = [(M, N, K) for _, M, N, K in checking.cases(simulator=False)]
    for stage in (None, *checking._STAGE_CASES_SIM):
        sizes += [(M, N, K) for _, M, N, K in checking.cases(simulator=True, stage_name=stage)]
    return sorted(set(sizes))


SIZES = _graders_sizes()
BENCHMARK = (16, 24, 8192)       # the benchmark's K, on 384 elements of C
JUDGE = track.get("gemm").judge  # what check_case (the grader) calls


def _grid(m):
    """The unit in the last of 24 significant bits of magnitudes m (0 where m is 0)."""
    _, e = np.frexp(m)                                   # m = f 2^e, f in [0.5, 1)
    return np.where(m > 0, np.ldexp(1.0, e - 24), 0.0)


def _toward_zero(x, grid):
    """x cut to a multiple of grid, toward zero (x itself where grid is 0, that is where x is 0)."""
    safe = np.where(grid > 0, grid, 1.0)
    return np.where(grid > 0, np.trunc(x / safe) * safe, x)


def tensor_core_sum(a, b, *, align="each term", skip_k=None, skip_step=None):
    """C [M, N] as float32 values (in float64), summed STEP products at a time in k order as the tensor cores do.
    align: "each term" cuts every term to the grid of the step's largest before adding them exactly; "the sum"
    adds the terms exactly and cuts the sum to that grid. skip_k: a product left out; skip_step: a step left out."""
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    (M, K), N = fa.shape, fb.shape[1]
    keep = np.ones(K)
    if skip_k is not None:
        keep[skip_k] = 0.0
    c = np.zeros((M, N))
    for k0 in range(0, K, STEP):
        if skip_step is not None and k0 == skip_step * STEP:
            continue
        ks = slice(k0, min(k0 + STEP, K))
        terms = fa[:, None, ks] * (fb[ks].T * keep[ks])[None]                   # [M, N, <= 16], exact
        terms = np.concatenate([c[..., None], terms], axis=2)
        grid = _grid(np.abs(terms).max(axis=2))
        if align == "each term":
            s = _toward_zero(terms, grid[..., None]).sum(axis=2)       # exact: at most 17 multiples of grid < 2^24
        else:
            s = _toward_zero(terms.sum(axis=2), grid)
        c = _toward_zero(s, _grid(np.abs(s)))                            # normalised to 24 bits, toward zero
    assert np.array_equal(c, c.astype(np.float32)), "the model's accumulator left float32"
    return c


def _bf16(c):
    return np.asarray(c, np.float32).astype(BF16)                      # the epilogue: to nearest even


def _problem(M, N, K, seed):
    return inputs.random_problem(M, N, K, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("align", ["each term", "the sum"])
@pytest.mark.parametrize("M, N, K", SIZES + [BENCHMARK])
def test_tensor_core_accumulation_passes(M, N, K, align):
    a, b = _problem(M, N, K, seed=K)
    v = JUDGE(_bf16(tensor_core_sum(a, b, align=align)), a, b)
    assert v.ok, str(v)


@pytest.mark.parametrize("M, N, K", SIZES + [BENCHMARK])
def test_float32_rounded_to_nearest_passes(M, N, K):
    """k by k in float32 (products exact, each sum rounded to nearest), and NumPy's blocked float32 product."""
    a, b = _problem(M, N, K, seed=K + 1)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros((M, N), np.float32)
    for k in range(K):
        acc += np.outer(fa[:, k], fb[k])
    for c in (acc, fa @ fb):
        v = JUDGE(_bf16(c), a, b)
        assert v.ok, str(v)


@pytest.mark.parametrize("M, N, K", SIZES)
def test_one_product_missing_fails(M, N, K):
    """At the graders' sizes a kernel that leaves out one k (first, middle or last) fails."""
    a, b = _problem(M, N, K, seed=K + 2)
    for k in sorted({0, K // 2, K - 1}):
        v = JUDGE(_bf16(tensor_core_sum(a, b, skip_k=k)), a, b)
        assert not v.ok, f"k = {k} left out passed at M={M}, N={N}, K={K}"


@pytest.mark.parametrize("M, N, K", SIZES + [BENCHMARK])
def test_one_step_missing_fails(M, N, K):
    """One k16 step left out (the first, a middle one, the last) fails at the graders' sizes and at K = 8192."""
    a, b = _problem(M, N, K, seed=K + 3)
    steps = -(-K // STEP)
    for s in sorted({0, steps // 2, steps - 1}):
        v = JUDGE(_bf16(tensor_core_sum(a, b, skip_step=s)), a, b)
        assert not v.ok, f"step {s} (k = {s * STEP} ..) left out passed at M={M}, N={N}, K={K}"


def test_the_model_cuts_toward_zero():
    """The model is the tensor cores' arithmetic, not float32's. 1 + 3 2^-24 is 1.5 units of 1's last place:
    float32 rounds it to 1 + 2^-22, the model cuts it to 1 + 2^-23 (and -1 - 3 2^-24 to -1 - 2^-23). Sixteen
    products of 2^-24 added to 1 in one step: each alone falls off 1's grid, their sum (2^-20) does not."""
    a, b = np.array([[1.0, 3 * 2.0 ** -12]], BF16), np.array([[1.0], [2.0 ** -12]], BF16)
    assert np.float32(1.0) + np.float32(3 * 2.0 ** -24) == 1.0 + 2.0 ** -22
    for align in ("each term", "the sum"):
        assert tensor_core_sum(a, b, align=align)[0, 0] == 1.0 + 2.0 ** -23
        assert tensor_core_sum(-a, b, align=align)[0, 0] == -1.0 - 2.0 ** -23
    a = np.array([[1.0] + [0.0] * 15 + [2.0 ** -12] * 16], BF16)
    b = np.array([[1.0]] + [[0.0]] * 15 + [[2.0 ** -12]] * 16, BF16)
    assert tensor_core_sum(a, b, align="each term")[0, 0] == 1.0
    assert tensor_core_sum(a, b, align="the sum")[0, 0] == 1.0 + 2.0 ** -20
