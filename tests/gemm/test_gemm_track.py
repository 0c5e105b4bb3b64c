"""The GEMM track's face and its checker: bad input gets errors that name the argument and the rule; the
tolerance accepts every honest float32 summation order and rejects the mistakes kernels make; records of the
track round-trip and regenerate their tables; lesson 09's count of tiles and waves, and the tile of each rung;
the machinery (grader, records) takes the track by name.
"""
import json

import ml_dtypes
import numpy as np
import pytest

from cudabook import check, gemm, labs, results, sizes, track, verdict
from cudabook.gemm import checking, inputs
from cudabook.gemm import waves

BF16 = ml_dtypes.bfloat16


def _bits_round(x):
    return np.asarray(x, np.float32).astype(BF16)


# ------------------------------------------------------------------------------------ the public face
# (the face every track shares: tests/machinery/test_track_contract.py)


@pytest.mark.parametrize("a, b, error, message", [
    ([[1.0]], np.ones((1, 1), BF16), TypeError, "a must be a NumPy array of bfloat16, got list"),
    (np.ones((2, 3), np.float32), np.ones((3, 2), BF16), TypeError, "a must be bfloat16, got float32"),
    (np.ones((2, 3), BF16), np.ones((3, 2), np.float16), TypeError, "b must be bfloat16, got float16"),
    (np.ones(3, BF16), np.ones((3, 2), BF16), ValueError, r"a must be 2-D \[M, K\], got 1-D"),
    (np.ones((2, 3), BF16), np.ones((1, 3, 2), BF16), ValueError, r"b must be 2-D \[K, N\], got 3-D"),
    (np.ones((2, 3), BF16), np.ones((4, 2), BF16), ValueError, "K must agree .a has 3 columns, b has 4 rows"),
    (np.ones((0, 3), BF16), np.ones((3, 2), BF16), ValueError, r"M \(rows of a\) is 0"),
    (np.ones((2, 3), BF16), np.ones((3, 0), BF16), ValueError, r"N \(columns of b\) is 0"),
])
def test_bad_input_names_the_argument_and_the_rule(a, b, error, message):
    with pytest.raises(error, match=message):
        inputs.validate(a, b)
    if gemm.STAGES:                       # run() validates before it launches anything
        with pytest.raises(error, match=message):
            gemm.run(gemm.STAGES[0], a, b)


def test_validate_returns_contiguous_bits():
    a, b = inputs.random_problem(5, 7, 3)
    ab, bb = inputs.validate(a[:, ::1], np.asfortranarray(b))
    assert ab.dtype == np.uint16 and bb.flags.c_contiguous and bb.shape == (3, 7)
    assert np.array_equal(ab.view(BF16), a)


def test_reference_is_float64_of_the_bf16_values():
    a = np.array([[1.0, 2.0]], BF16)
    b = np.array([[3.0], [0.5]], BF16)
    assert gemm.reference(a, b).tolist() == [[4.0]] and gemm.reference(a, b).dtype == np.float64


# ------------------------------------------------------------------------------------ the checker

@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (17, 33, 20), (64, 48, 1000), (8, 8, 4096)])
def test_every_honest_float32_order_passes(M, N, K, rng):
    """fp32 sums in four orders (BLAS's blocking, left to right, pairwise-ish by chunks, reversed), each
    rounded once to bf16: all must pass, or the tolerance is too tight for a correct kernel."""
    a, b = inputs.random_problem(M, N, K, rng=rng)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    orders = {"blas": fa @ fb, "chunks of 16": sum(fa[:, k:k + 16] @ fb[k:k + 16] for k in range(0, K, 16))}
    acc = np.zeros((M, N), np.float32)
    for k in range(K - 1, -1, -1) if K <= 1000 else ():
        acc += np.outer(fa[:, k], fb[k]).astype(np.float32)
    if K <= 1000:
        orders["reversed"] = acc
    for name, c in orders.items():
        v = gemm.judge(_bits_round(c), a, b)
        assert v.ok, f"{name}: {v}"


def _wrong(M, N, K, how, rng):
    a, b = inputs.random_problem(M, N, K, rng=rng)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    c = fa @ fb
    if how == "K tail dropped":                  # the last partial K tile forgotten
        c = fa[:, :K - K % 8] @ fb[:K - K % 8]
    elif how == "one k missing":
        c = fa[:, 1:] @ fb[1:]
    elif how == "truncated, not rounded":         # bf16 by dropping the low 16 bits
        bits = (c.view(np.uint32) >> 16).astype(np.uint16)
        return a, b, bits.view(BF16)
    elif how == "last columns unwritten":
        c[:, N - N % 8:] = np.nan
    elif how == "b read transposed":
        c = fa @ fb.T
    elif how == "accumulated in bf16":
        acc = np.zeros((M, N), np.float32)
        for k in range(K):
            acc = (acc + np.outer(fa[:, k], fb[k])).astype(BF16).astype(np.float32)
        c = acc
    elif how == "race: one tile stale":
        c[:8, :8] = (fa[:8, :8] @ fb[:8, :8])
    return a, b, _bits_round(c)


@pytest.mark.parametrize("how, hint", [
    ("K tail dropped", "without the last 4 value(s) of k (k = 40 .. 43)"),
    ("one k missing", "without the first 1 value(s) of k"), ("truncated, not rounded", None),
    ("last columns unwritten", "never written"), ("b read transposed", "indexing"),
    ("accumulated in bf16", None), ("race: one tile stale", "race"),
])
def test_the_checker_catches_the_mistakes_kernels_make(how, hint, rng):
    M, N, K = (33, 33, 44) if how != "b read transposed" else (24, 24, 24)
    a, b, got = _wrong(M, N, K, how, rng)
    v = gemm.judge(got, a, b)
    assert not v.ok and v.wrong > 0, how
    if hint:
        assert hint in v.message, v.message


def test_nan_never_passes_and_shape_is_checked(rng):
    a, b = inputs.random_problem(4, 4, 4, rng=rng)
    c = _bits_round(a.astype(np.float32) @ b.astype(np.float32))
    c[1, 2] = np.nan
    v = gemm.judge(c, a, b)
    assert not v.ok and v.nan == 1 and "C[1, 2]" in v.message
    assert "shape" in gemm.judge(c[:3], a, b).message


def test_the_tolerance_is_the_arithmetic(rng):
    """half a bf16 ulp of |C| plus 4 K u W / (1 - 4 K u), W = (sum |a||b| + |C|) / 2: nothing more."""
    a, b = inputs.random_problem(3, 5, 300, rng=rng)
    ref, bound = inputs.reference_with_bound(a, b)
    loss = 4 * 300 * 2.0 ** -24
    W = (np.abs(a.astype(float)) @ np.abs(b.astype(float)) + np.abs(ref)) / 2
    assert np.allclose(bound, loss / (1 - loss) * W)
    worst = np.argmax(bound)
    i, j = np.unravel_index(worst, ref.shape)
    off = ref.copy()
    off[i, j] = ref[i, j] + 3 * (bound[i, j] + verdict.bf16_half_ulp(ref[i, j]))
    assert not checking.compare(off, ref, bound).ok


def test_grading_cases_are_fresh_and_ragged():
    c1, c2 = checking.grading_cases(), checking.grading_cases()
    assert not np.array_equal(c1[0][1][0], c2[0][1][0])          # fresh random inputs each call
    shapes = [(a.shape[0], b.shape[1], a.shape[1]) for _, (a, b), _ in c1]
    assert (1, 1, 1) in shapes and any(K % 8 for _, _, K in shapes)


# ------------------------------------------------------------------------------------ records

GEMM_RECORD = {
    "gpu": "NVIDIA Testcard", "commit": "abc1234", "date": "2026-11-26T00:00:00+00:00",
    "workloads": {"gemm M=64 N=64 K=64": {"track": "gemm", "size": {"M": 64, "N": 64, "K": 64},
                                          "context": {"flops": 524288, "cublas_TFLOPs": 1.0}, "stages": {
        "01_naive": {"median_us": 100.0, "TFLOPs": 0.01, "pct_of_cublas": 0.5, "pct_of_cublas_sgemm": 20.0,
                     "correct": True},
        "05_wgmma_tma": {"skipped": "05_wgmma_tma needs compute capability 9.0"}},
        "peers": {"cublas": {"median_us": 0.5, "TFLOPs": 1.05, "pct_of_cublas": 100.0, "correct": True}}}},
}


def test_a_gemm_record_round_trips_and_tabulates(tmp_path):
    path = results.save(GEMM_RECORD, tmp_path)
    assert results.load(path) == GEMM_RECORD
    text = results.table(GEMM_RECORD)
    assert "| stage | µs | TFLOP/s | % of cuBLAS | % of SGEMM | speed-up vs 01 | correct |" in text
    assert "| 01_naive | 100.0 | 0.0 | 0.5 | 20 | 1.0× | ✓ |" in text
    assert "cuBLAS 1 TFLOP/s" in text and "needs compute capability 9.0" in text


@pytest.mark.parametrize("breakage, message", [
    (lambda s: s.update(TFLOPs=2.0), r"01_naive is inconsistent: TFLOPs 2.0 but 524,288 FLOPs in 100.0 µs"),
    (lambda s: s.update(pct_of_cublas=50.0), r"pct_of_cublas 50.0 but cublas took 0.5 µs"),
    (lambda s: s.update(median_us=-1.0), "a time must be positive"),
    (lambda s: s.update(checks={"before_timing": True, "after_timing": False}), "correct is true but its checks"),
])
def test_a_record_whose_figures_disagree_is_refused(tmp_path, breakage, message):
    record = json.loads(json.dumps(GEMM_RECORD))
    breakage(record["workloads"]["gemm M=64 N=64 K=64"]["stages"]["01_naive"])
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(results.RecordError, match=message):
        results.load(tmp_path / "bad.json")


def test_a_gemm_record_missing_a_figure_names_it(tmp_path):
    record = json.loads(json.dumps(GEMM_RECORD))
    record["workloads"]["gemm M=64 N=64 K=64"]["stages"]["01_naive"].pop("pct_of_cublas")
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(results.RecordError, match=r"stages\.01_naive\.pct_of_cublas"):
        results.load(tmp_path / "bad.json")


def test_saving_one_track_keeps_the_other_with_its_own_pedigree(tmp_path):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "machinery" / "test_results.py"   # its resampling record
    spec = importlib.util.spec_from_file_location("machinery_test_results", path)
    machinery = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(machinery)
    RECORD = machinery.RECORD
    results.save(RECORD, tmp_path)
    newer = dict(json.loads(json.dumps(GEMM_RECORD)), commit="def5678")
    path = results.save(newer, tmp_path)
    both = results.load(path)
    assert set(both["workloads"]) == {"resample B=1 S=2 T=3 D=4 sorted", "gemm M=64 N=64 K=64"}
    kept = both["workloads"]["resample B=1 S=2 T=3 D=4 sorted"]
    assert kept["commit"] == "abc1234" and both["commit"] == "def5678"
    assert "commit abc1234" in results.table(both, "resample B=1 S=2 T=3 D=4 sorted")
    assert "copy ceiling 3,000 GB/s" in results.table(both, "resample B=1 S=2 T=3 D=4 sorted")
    readme = tmp_path / "README.md"
    readme.write_text(f"{results.BEGIN}\n{results.END}\n")
    results.update_readme(readme, tmp_path)
    assert (tmp_path / "Testcard.png").exists() and (tmp_path / "Testcard_gemm.png").exists()
    assert "results/Testcard_gemm.png" in readme.read_text()



# ------------------------------------------------------------------------------------ waves of tiles (lesson 09)

def test_tiles_and_waves_are_counted():
    assert waves.tiles(1024, 1024, 128, 128) == 64
    assert waves.tiles(1000, 1000, 128, 256) == 8 * 4                       # a ragged edge is a whole tile
    assert waves.wave_efficiency(1024, 1024, 128, 128, 132) == pytest.approx(64 / 132)    # half a wave
    assert waves.wave_efficiency(2048, 2048, 128, 128, 132) == pytest.approx(256 / 264)   # two waves, one short
    assert waves.wave_efficiency(1024, 1024, 128, 128, 132, per_sm=2) == pytest.approx(64 / 264)
    assert waves.wave_efficiency(1056, 128, 8, 128, 132) == 1.0            # exactly one full wave


@pytest.mark.parametrize("params, tile", [
    ({"bm": 128, "bn": 256, "bk": 32}, (128, 256)),                           # rungs 03, 04
    ({"bn": 128, "warpgroups": 2, "stages": 4}, (128, 128)),                  # rung 05
    ({"bn": 256, "consumers": 2, "stages": 4}, (128, 256)),                   # rungs 06, 07
    ({"tile": 16}, (16, 16)),                                                 # rung 02
    ({"threads_x": 32, "threads_y": 8}, None),                                # rung 01: no tile of C
    (None, None),                                                             # a peer
])
def test_the_tile_of_a_rung_from_its_params(params, tile):
    assert waves.tile_of(params) == tile


def test_every_tiled_rung_names_its_tile_and_the_size_record_keeps_it():
    for name in gemm.STAGES[1:]:
        assert waves.tile_of(gemm.stage(name).PARAMS), name
    for record in sizes.load("gemm"):                                       # results/sizes/<gpu>_gemm.json
        rungs = [r for r in record["rows"] if not r.get("peer") and "median_us" in r]
        assert rungs, record["gpu"]
        for row in rungs:
            if row["stage"] != "01_naive":
                assert waves.tile_of(row.get("params")), (record["gpu"], row["stage"])


def test_the_wave_plot_draws_a_line_per_tile_shape():
    from matplotlib.figure import Figure
    ax = waves.plot_waves(sms=132, tile_shapes=((128, 128), (64, 64)), ax=Figure().subplots())
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["128x128 tiles", "64x64 tiles"]
    assert all(0 < y <= 100 for line in lines for y in line.get_ydata())
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(s) for s in waves.SIZES]


# ------------------------------------------------------------------------------------ the grader takes a track

# (its name, a lab's TODO: tests/machinery/test_track_contract.py)
STOP = np.zeros(1, np.int32)


def test_a_kernel_that_never_ends_fails_with_a_time_limit(monkeypatch, capsys):
    """The grader must never hang: an endless loop gets 'did not finish', and the grading returns."""
    import time

    import cudabook
    from numba import cuda
    if not cudabook.SIMULATOR:
        pytest.skip("on a GPU the endless kernel would keep the GPU busy for the rest of the test process")
    monkeypatch.setitem(check.TIME_LIMIT_S, "simulator", 2)

    @cuda.jit
    def gemm_naive(a, b, c):
        while STOP[0] == 0:          # the simulator reads the live global: the test ends the loop afterwards
            pass

    STOP[0] = 0
    start = time.monotonic()
    try:
        assert not labs.grade("01_naive", gemm_naive, track="gemm")
    finally:
        STOP[0] = 1
    assert time.monotonic() - start < 30
    assert "did not finish in 2 s" in capsys.readouterr().out
    from numba.cuda.simulator import kernel as simulated
    while simulated._kernel_context is not None and time.monotonic() - start < 60:
        time.sleep(0.05)                 # the released kernel winds down before the next test launches one
    assert simulated._kernel_context is None
