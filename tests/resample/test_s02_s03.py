"""Stages 02 (a warp per target) and 03 (wide, aligned accesses) against the reference: both searches, every
vector width, every edge case, in the simulator and on a GPU; the 32-way search against np.searchsorted; the
address pictures of the lesson."""
import numpy as np
import pytest
from numba import cuda

from cudabook import resample
from cudabook.resample import checking as check
from cudabook.resample import s02_warp_shuffles as s02
from cudabook.resample import s03_coalesced as s03

# (label, launch, params): every way the two stages can run
VARIANTS = [
    ("02-ballot", s02.launch, dict(search="ballot")),
    ("02-lane0", s02.launch, dict(search="lane0")),
    ("03-16B", s03.launch, dict(vec_bytes=16)),
    ("03-8B", s03.launch, dict(vec_bytes=8)),
    ("03-4B", s03.launch, dict(vec_bytes=4)),
    ("03-2B", s03.launch, dict(vec_bytes=2)),
]
IDS = [v[0] for v in VARIANTS]

# B, S, T, D, sorted, warps_per_block. Small: each simulated target is 32 Python threads.
CASES = [
    (2, 40, 3, 9, True, 2),      # odd D (every width falls back to 2 bytes); B * T = 6 fills 3 blocks of 2 warps
    (1, 2, 5, 1, False, 4),      # S = 2, D = 1, B = 1, unsorted; 5 warps in blocks of 4 (a block with 3 idle warps)
    (2, 37, 3, 12, False, 1),    # D = 12: 24-byte rows, aligned for 8 bytes but not 16
    (1, 300, 3, 40, True, 2),    # two rounds of the 32-way search; 80-byte rows: 16 bytes fit
]


@pytest.mark.parametrize("label,launch,params", VARIANTS, ids=IDS)
@pytest.mark.parametrize("B,S,T,D,is_sorted,wpb", CASES)
def test_random(label, launch, params, B, S, T, D, is_sorted, wpb):
    v = check.check_launch(launch, B, S, T, D, sorted_targets=is_sorted, warps_per_block=wpb, **params)
    assert v.ok, f"{label}: {v}"


def edge_inputs(D, S=6):
    """Targets before the first and after the last source time, exactly on every knot, between knots, in a
    scrambled order."""
    st, sf, _ = resample.random_problem(1, S, 1, D)
    mids = (st[:, :-1] + st[:, 1:]) / 2
    tt = np.concatenate([st[:, -1:] + 3, mids[:, ::-1], st, st[:, :1] - 3, st[:, :1] - 1e-3], axis=1)
    return st, sf, tt.astype(np.float32)


@pytest.mark.parametrize("label,launch,params", VARIANTS, ids=IDS)
@pytest.mark.parametrize("D", [10, 11])     # 10: even, a multiple of no vector width over 4 bytes; 11: odd
def test_edges(label, launch, params, D):
    st, sf, tt = edge_inputs(D)
    v = check.check_on(launch, st, sf, tt, **params)
    assert v.ok, f"{label}: {v}"


@pytest.mark.parametrize("label,launch,params", VARIANTS, ids=IDS)
def test_knots_give_exact_values(label, launch, params):
    st, sf, _ = resample.random_problem(1, 5, 1, 16)
    p = resample.upload(st, sf, st.copy())
    p.poison()
    launch(p, **params)
    assert np.array_equal(p.result().view(np.uint16), sf.view(np.uint16))


@pytest.mark.parametrize("label,launch,params", VARIANTS, ids=IDS)
def test_no_targets(label, launch, params):
    v = check.check_launch(launch, 2, 5, 0, 8, **params)
    assert v.ok, f"{label}: {v}"


# ---------------------------------------------------------------- the searches alone


@cuda.jit
def _intervals(times, targets, out, lane0):
    T = targets.shape[1]
    warp, lane = s02.warp_and_lane()
    if warp >= targets.shape[0] * T:
        return
    b = warp // T
    t = warp - b * T
    if lane0:
        lo = s02.lane0_find_interval(times, b, targets[b, t], lane)
    else:
        lo = s02.warp_find_interval(times, b, targets[b, t], lane)
    if lane == 31:                   # every lane must agree: take the answer from the last one
        out[b, t] = lo


@pytest.mark.parametrize("lane0", [False, True], ids=["ballot", "lane0"])
@pytest.mark.parametrize("S", [2, 3, 33, 34, 1200])
def test_search_matches_searchsorted(lane0, S):
    st, _, _ = resample.random_problem(1, S, 1, 1)
    knots = np.unique([0, 1, S // 2, S - 2, S - 1])
    gaps = np.unique([0, S // 2 - 1, S - 2])                         # intervals [i, i+1] to hit in the middle
    tt = np.concatenate([st[:, :1] - 1, st[:, knots], (st[:, gaps] + st[:, gaps + 1]) / 2, st[:, -1:] + 1],
                        axis=1).astype(np.float32)
    want = np.clip(np.searchsorted(st[0], tt[0], side="right") - 1, 0, S - 2)
    out = cuda.to_device(np.full(tt.shape, -1, np.int64))
    T = tt.shape[1]
    _intervals[(T + 3) // 4, 128](cuda.to_device(st), cuda.to_device(tt), out, lane0)
    assert np.array_equal(out.copy_to_host()[0], want)


# ---------------------------------------------------------------- parameters, widths, pictures


def test_bad_parameters_say_what_is_allowed():
    p = resample.upload(*resample.random_problem(1, 3, 2, 4))
    with pytest.raises(ValueError, match="search"):
        s02.launch(p, search="binary")
    with pytest.raises(ValueError, match="vec_bytes"):
        s03.launch(p, vec_bytes=32)
    with pytest.raises(ValueError, match="warps_per_block"):
        s03.launch(p, warps_per_block=0)


def test_a_learners_kernel_needs_aligned_rows():
    p = resample.upload(*resample.random_problem(1, 3, 2, 12))     # 24-byte rows: not a multiple of 16
    with pytest.raises(ValueError, match="multiple of 16"):
        s03.launch(p, kernel=s03.resample_vec8)                      # any kernel but the stage's own default
    p.poison()
    s03.launch(p, kernel=s03.resample_vec8, vec_bytes=8)             # 8 bytes fit: runs


@pytest.mark.parametrize("vec_bytes,D,width", [
    (16, 256, 16), (16, 8, 16), (16, 12, 8), (16, 10, 4), (16, 9, 2), (16, 1, 2), (8, 256, 8), (8, 6, 4),
    (4, 3, 2), (2, 256, 2)])
def test_vector_width_keeps_rows_aligned(vec_bytes, D, width):
    assert s03.vector_width(vec_bytes, D) == width
    assert (2 * D) % width == 0


def test_lane_addresses_and_sectors():
    wide = s03.lane_addresses(16, 256)
    assert wide[0] == (0, 0, 15) and wide[-1] == (31, 496, 511) and len(wide) == 32
    assert s03.transactions(wide) == 16                              # 512 contiguous bytes: 16 sectors
    scalar = s03.lane_addresses(2, 256)
    assert scalar[5] == (5, 10, 11) and s03.transactions(scalar) == 2    # stage 02: 64 bytes, 2 sectors
    assert s03.transactions(s03.lane_addresses(4, 256)) == 4
    assert s03.transactions(s03.lane_addresses(8, 256)) == 8
    naive = s03.naive_lane_addresses(256)
    assert naive[1] == (1, 512, 513) and s03.transactions(naive) == 32  # stage 01: a sector per lane, 2 B used
    assert len(s03.lane_addresses(16, 24)) == 3                      # a short row leaves lanes idle
    assert s03.lane_addresses(16, 12)[-1] == (2, 16, 23)             # 24-byte rows: 8-byte accesses
    assert s03.transactions(s03.lane_addresses(16, 256, row_base=8)) == 17   # misaligned start: one more sector
    assert s03.transactions([(0, 30, 33)]) == 2


# ---------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("label,launch,params", VARIANTS, ids=IDS)
@pytest.mark.parametrize("D", [1, 7, 64, 129, 256])
def test_gpu_sizes(label, launch, params, D):
    for is_sorted in (True, False):
        v = check.check_launch(launch, 3, 777, 1500, D, sorted_targets=is_sorted, **params)
        assert v.ok, f"{label}, sorted={is_sorted}: {v}"


@pytest.mark.gpu
def test_gpu_benchmark_size_all_variants():
    st, sf, tt = resample.random_problem(**dict(B=64, S=4096, T=4096, D=256))
    ref, scale = resample.inputs.reference_with_scale(st, sf, tt)
    p = resample.upload(st, sf, tt)
    for label, launch, params in VARIANTS:
        p.poison()
        launch(p, **params)
        v = check.compare(p.result(), ref, scale, targets=tt, times=st)
        assert v.ok, f"{label}: {v}"


@pytest.mark.gpu
def test_gpu_sass_has_the_wide_accesses():
    p = resample.upload(*resample.random_problem(2, 50, 60, 256))
    s03.launch(p, vec_bytes=16)
    s03.launch(p, vec_bytes=8)
    s02.launch(p)
    try:
        sass16 = "\n".join(s03.resample_vec16.inspect_sass().values())
    except Exception as e:           # nvdisasm is not on every machine
        pytest.skip(f"no SASS disassembler here: {e}")
    sass8 = "\n".join(s03.resample_vec8.inspect_sass().values())
    sass2 = "\n".join(s02.resample_warp.inspect_sass().values())
    assert "LDG.E.128" in sass16 and "STG.E.128" in sass16
    assert "LDG.E.64" in sass8 and "STG.E.64" in sass8
    assert "VOTE.ANY" in sass2 and "SHFL.IDX" in sass2 and "LDG.E.U16" in sass2
