"""GEMM 08, FP8: 07's kernel compiled with FP8=1 on e4m3 inputs with per-tensor scales.

CPU: the quantisation (power-of-two scales, largest magnitude at most 448, values exact in bf16 once scaled
back), the tensor maps pass check_tiled, and the kernel compiles to an sm_90a cubin whose SASS has the e4m3
tensor-core instruction (QGMMA 64 x 256 x 32, four a 128-byte k-tile), TMA loads and stores, and no spills.
The tolerance (s08.judge): a NumPy model of the e4m3 tensor cores' arithmetic (13 bits kept below the largest
term of each k32 step, as measured) passes at the graders' sizes; the same with a k32 step or one product left
out fails.
GPU (hopper): the 13 bits measured; the product of the quantised inputs on ragged shapes and at 4096^3; 08 equal
bit for bit to cuBLASLt's FP8 GEMM with fast accumulation (torch._scaled_mm), and a wrong scale caught.
"""
import numpy as np
import pytest

from cudabook import gemm, nvrtc, tma
from cudabook.gemm import s08_fp8 as s08
from cudabook.gemm.inputs import BF16
from helpers import sass_or_skip


def test_scales_are_powers_of_two_and_fit_e4m3(rng):
    for spread in (1e-3, 1.0, 300.0, 1e4):
        x = (rng.standard_normal((64, 48)) * spread).astype(BF16)
        q, s = s08.quantize(x)
        assert s == 2.0 ** round(np.log2(s))
        back = q.astype(np.float32)
        assert np.abs(back).max() <= s08.E4M3_MAX and np.isfinite(back).all()
        assert np.abs(x.astype(np.float32)).max() / s > s08.E4M3_MAX / 2     # the smallest such power of two
    assert s08.scale_for(np.zeros(4, np.float32)) == 1.0


def test_judged_inputs_are_the_quantised_ones_exactly(rng):
    a, b = gemm.random_problem(50, 40, 30, rng=rng)
    qa, qb = s08.judged_on(a, b)
    assert qa.dtype == BF16 and qa.shape == a.shape and qb.shape == b.shape
    again_a, _ = s08.judged_on(qa, qb)
    np.testing.assert_array_equal(again_a.astype(np.float32), qa.astype(np.float32))   # a fixed point: exact
    rel = np.abs(qa.astype(np.float64) - a.astype(np.float64)) / np.maximum(np.abs(a.astype(np.float64)), 1e-3)
    assert 0 < np.median(rel) < 2.0 ** -4         # e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 relative


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (8192, 8192, 8192), (129, 257, 72), (100, 64, 7),
                                   (300, 1, 300)])
def test_tensor_maps_pass_check_tiled(M, N, K):
    maps = s08.tensor_maps(M, N, K)
    for args in maps.values():
        tma.check_tiled(**args)
    assert maps["A"]["box"] == (128, 128) and maps["B"]["box"] == (64, 128)       # 128 bytes of K a row
    assert maps["A"]["shape"][1] % 16 == 0 and maps["B"]["shape"] == (N, maps["A"]["shape"][1])


def test_sass_has_the_e4m3_tensor_core_instruction():
    sass_or_skip()
    cubin = s08.compile_cubin()
    qgmma = nvrtc.sass_lines(cubin, r"^QGMMA\.64x256x32\.F32\.E4M3\.E4M3", kernel=s08.KERNEL)
    assert len(qgmma) == 4, qgmma                     # four k32 steps a 128-byte k-tile
    assert not nvrtc.sass_lines(cubin, r"^HGMMA", kernel=s08.KERNEL)
    assert nvrtc.sass_lines(cubin, r"^UTMALDG\.2D\.MULTICAST", kernel=s08.KERNEL)
    assert nvrtc.sass_lines(cubin, r"^UTMASTG\.2D", kernel=s08.KERNEL)
    usage = nvrtc.resource_usage(cubin)[s08.KERNEL]
    assert usage["local"] == 0 and usage["stack"] == 0, usage


def test_the_levers_are_07s():
    from cudabook.gemm import s07_clusters as s07
    assert s08.PARAMS == s07.PARAMS and s08.SOURCE == s07.SOURCE and gemm.STAGES[-1] == "08_fp8"


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="bn must be 128 or 256"):
        s08.compile_cubin(bn=64)
    with pytest.raises(TypeError):
        s08.compile_cubin(tile=3)


def _run(a, b, **params):
    p = gemm.upload(a, b)
    p.poison()
    s08.launch(p, **params)
    return p.result()


@pytest.mark.hopper
@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (129, 257, 72), (8, 8, 8), (100, 64, 7), (300, 1, 300),
                                   (1037, 600, 520)])
@pytest.mark.parametrize("params", [{}, {"cluster": 1, "bn": 128, "stages": 5}, {"stream_k": True, "blocks": 6}],
                         ids=["default", "bn128", "stream-k"])
def test_correct(M, N, K, params, rng):
    a, b = gemm.random_problem(M, N, K, rng=rng)
    verdict = s08.judge(_run(a, b, **params), a, b)
    assert verdict.ok, str(verdict)


@pytest.mark.hopper
def test_4096_and_the_cost_of_quantising():
    rng = np.random.default_rng(4096)
    a, b = gemm.random_problem(4096, 4096, 4096, rng=rng)
    got = _run(a, b)
    assert s08.judge(got, a, b).ok
    assert not gemm.judge(got, a, b).ok               # against the bf16 inputs, e4m3's rounding shows


@pytest.mark.hopper
def test_a_wrong_scale_fails(rng, monkeypatch):
    a, b = gemm.random_problem(300, 200, 160, rng=rng)
    p = gemm.upload(a, b)
    s08.operands(p)
    p.fp8_scale *= 2
    p.poison()
    s08.launch(p)
    assert not s08.judge(p.result(), a, b).ok


# ------------------------------------------------------------------------ the tolerance, on a model of the arithmetic
def _model(a, b, drop_step=None, drop_k=None):
    """C as the e4m3 tensor cores compute it: per k32 step, the accumulator and 32 exact products aligned to the
    largest and cut toward zero at 13 bits below it, the sum stored in float32; then scaled and rounded to bf16."""
    qa, qb = (x.astype(np.float64) for x in s08.judged_on(a, b))
    (M, K), N = qa.shape, qb.shape[1]
    acc = np.zeros((M, N))
    for s in range(-(-K // 32)):
        if s == drop_step:
            continue
        ks = [k for k in range(32 * s, min(K, 32 * s + 32)) if k != drop_k]
        terms = np.concatenate([acc[None], qa[:, ks].T[:, :, None] * qb[ks][:, None, :]])
        top = np.max(np.abs(terms), axis=0)
        grid = np.exp2(np.floor(np.log2(np.where(top > 0, top, 1.0))) - s08.KEPT_BITS)
        acc = (np.trunc(terms / grid) * grid).sum(axis=0).astype(np.float32).astype(np.float64)
    return acc.astype(BF16)


@pytest.mark.parametrize("M,N,K", [(48, 40, 160), (33, 70, 300), (64, 64, 96)])
def test_the_model_of_the_tensor_cores_passes_and_its_mistakes_fail(M, N, K, rng):
    a, b = gemm.random_problem(M, N, K, rng=rng)
    assert s08.judge(_model(a, b), a, b).ok
    assert not s08.judge(_model(a, b, drop_step=1), a, b).ok          # a k32 step left out
    if K <= 160:        # (a product is at most 1; from K = 300 on the bound is above 1: one hides there)
        assert not s08.judge(_model(a, b, drop_k=K // 2), a, b).ok    # one product left out
    assert not gemm.judge(_model(a, b), a, b).ok                       # e4m3's rounding, against the bf16 inputs


@pytest.mark.hopper
@pytest.mark.parametrize("where", [(0, 1, 2), (0, 200, 1), (0, 200, 40)],
                         ids=["one step", "cancelled two steps later", "q a step after the big term"])
def test_the_tensor_cores_keep_13_bits(where):
    """+2^8, -2^8 and a small q: q survives the k32 step it shares with 2^8 (or with an accumulator holding
    2^8) down to 2^-5 (13 bits below), and is cut to zero from 2^-6; one that meets 2^8 nowhere is kept."""
    big, minus, small = where
    for e, kept in ((5, True), (6, False)):
        a = np.zeros((64, 256), np.float32)
        b = np.zeros((256, 8), np.float32)
        a[:, big], b[big] = 16.0, 16.0
        a[:, minus], b[minus] = -16.0, 16.0
        a[:, small], b[small] = 2.0 ** -e, 1.0
        got = _run(a.astype(BF16), b.astype(BF16)).astype(np.float64)
        meets = small < 32 or (big < 32 <= small < minus)           # q in a step where 2^8 is present
        assert got[0, 0] == (2.0 ** -e if kept or not meets else 0.0), (where, e, got[0, 0])


@pytest.mark.hopper
def test_equal_to_cublaslt_fp8_with_fast_accumulation():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    a, b = gemm.random_problem(2048, 2048, 4096, rng=rng)
    p = gemm.upload(a, b)
    p.poison()
    s08.launch(p)
    ours = p.result().astype(np.float32)
    a8, bt8, _, _, _, scale = s08.operands(p)
    dev = torch.device("cuda")
    qa = torch.from_numpy(a8.copy_to_host()).to(dev).view(torch.float8_e4m3fn)
    qbt = torch.from_numpy(bt8.copy_to_host()).to(dev).view(torch.float8_e4m3fn)
    theirs = torch._scaled_mm(qa, qbt.t(), scale_a=torch.tensor(1.0, device=dev),
                              scale_b=torch.tensor(float(scale), device=dev), out_dtype=torch.bfloat16,
                              use_fast_accum=True).float().cpu().numpy()
    np.testing.assert_array_equal(ours, theirs)
