"""08 fused search and gather: the rung that does what torch.compile generates, in one kernel.

CPU: the kernel compiles for sm_80 and sm_90a with no spills and the instructions the lesson names (16-byte
LDGs, F2FP, no LDGSTS or TMA: nothing is staged), the host's checks refuse bad parameters and problems too large
for 32-bit offsets with the rule, and the emulator runs every search on awkward cases (rows longer than the
window's first round, sparse targets that leave the window, any D). The lab's planted mistakes
(cudabook/resample/mistakes.py) fail in tests/resample/test_resample_mistakes.py.
GPU: the edge cases every stage passes, random cases, every search and parameter variant, the prepass's pairs,
the benchmark size, and programmatic dependent launch against a plain launch.
"""
import re

import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, notebooks, nvrtc, resample
from cudabook.resample import checking as check
from cudabook.resample import inputs, s08_fused_gather as s08
from helpers import sass_or_skip
from test_s06_s07 import EDGE, EDGE_IDS, RANDOM

needs_simulator = pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")


# ------------------------------------------------------------------------------------------ CPU
def test_the_stage_is_listed():
    assert resample.STAGES[-1] == "08_fused_gather" and resample.stage(8) is s08
    assert s08.source().count("// >>> lab:") == 1 and s08.source().count("// <<< lab") == 1


@pytest.mark.parametrize("D", [256, 512, 520, 12, 6, 7])
@pytest.mark.parametrize("search", ["window", "lane", "prepass"])
def test_it_compiles_without_spills(D, search):
    try:
        nvrtc.cuobjdump_path()
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    use = nvrtc.resource_usage(s08.compile_cubin("sm_90a", D=D, search=search))
    assert use[s08.KERNEL]["local"] == 0 and use[s08.KERNEL]["stack"] == 0, use
    assert use[s08.KERNEL]["registers"] <= 32, use          # min_blocks=16 at 128 threads: the whole SM's lanes
    assert use[s08.FIND]["local"] == 0


def test_two_vectors_a_lane_fit_32_registers_where_unroll_2_spills():
    # lesson 08 says so: the same four 16-byte loads in flight a lane, from one address (vectors_per_lane=2, the
    # default) or from two (unroll=2): the second spills under the 32-register cap, and not under 12 blocks an SM
    try:
        nvrtc.cuobjdump_path()
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    for D in (256, 512):
        two = nvrtc.resource_usage(s08.compile_cubin("sm_90a", D=D))[s08.KERNEL]
        assert two["stack"] == 0 and two["local"] == 0 and two["registers"] <= 32, two
        spilled = nvrtc.resource_usage(s08.compile_cubin("sm_90a", D=D, unroll=2, vectors_per_lane=1))[s08.KERNEL]
        assert spilled["stack"] > 0, spilled
        roomier = nvrtc.resource_usage(s08.compile_cubin("sm_90a", D=D, unroll=2, vectors_per_lane=1,
                                                         min_blocks=12))[s08.KERNEL]
        assert roomier["stack"] == 0 and roomier["local"] == 0, roomier
    four = nvrtc.resource_usage(s08.compile_cubin("sm_90a", D=256, vectors_per_lane=4))[s08.KERNEL]
    assert four["stack"] > 0, four                        # eight loads a lane: spilled again


def test_the_sass_gathers_16_bytes_and_stages_nothing():
    sass_or_skip()
    cubin = s08.compile_cubin("sm_90a", D=256)
    loads = [line for line in nvrtc.sass_lines(cubin, r"^(@!?P\d )?LDG", kernel=s08.KERNEL) if ".128" in line]
    assert len(loads) == 2 * s08.PARAMS["vectors_per_lane"] == 4, loads   # two 16-byte pieces of each row
    bases = {re.search(r"\[(R\d+)\.64", line).group(1) for line in loads}
    assert len(bases) == 1, loads            # from one address: the others are offsets in the instruction
    assert nvrtc.sass_lines(cubin, r"^(@!?P\d )?STG\.E\.128", kernel=s08.KERNEL)
    assert nvrtc.sass_lines(cubin, r"^F2FP\.BF16", kernel=s08.KERNEL)
    assert nvrtc.sass_lines(cubin, r"^SHFL\.IDX", kernel=s08.KERNEL)  # each element asks the owning lane
    assert not nvrtc.sass_lines(cubin, r"^LDGSTS|^UTMALDG", kernel=s08.KERNEL)
    assert nvrtc.sass_lines(cubin, r"^(@!?P\d )?STS", kernel=s08.KERNEL)        # the window of source times
    assert not nvrtc.sass_lines(s08.compile_cubin("sm_90a", D=256, search="lane"), r"^(@!?P\d )?STS", kernel=s08.KERNEL)
    prepass = s08.compile_cubin("sm_90a", D=256, search="prepass")
    lane = s08.compile_cubin("sm_90a", D=256, search="lane")
    for c in (cubin, prepass, lane):  # every search waits for the kernel before it (PDL) before it touches memory
        assert nvrtc.waits_first_in_sass(c, s08.KERNEL)
    assert nvrtc.waits_first_in_sass(prepass, s08.FIND)                    # and the prepass before it lets the gather start
    assert nvrtc.sass_lines(prepass, r"^PREEXIT", kernel=s08.FIND)
    assert not nvrtc.sass_lines(cubin, r"^PREEXIT", kernel=s08.KERNEL)     # the gather triggers only with trigger
    early = s08.compile_cubin("sm_90a", D=256, trigger=True)
    assert nvrtc.waits_first_in_sass(early, s08.KERNEL) and nvrtc.sass_lines(early, r"^PREEXIT", kernel=s08.KERNEL)
    assert s08.compile_cubin("sm_80", D=256)[:4] == b"\x7fELF"


def test_bad_parameters_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="targets_per_warp must be 1..32"):
        s08.config(256, targets_per_warp=33)
    with pytest.raises(ValueError, match="targets_per_warp must be 1..32 .* or \"auto\", got 'four'"):
        s08.config(256, targets_per_warp="four")
    with pytest.raises(ValueError, match="vectors_per_lane must be 1..8, got 0"):
        s08.config(256, vectors_per_lane=0)
    with pytest.raises(ValueError, match="vectors_per_lane must be 1..8, got 2.0"):
        s08.config(256, vectors_per_lane=2.0)
    with pytest.raises(ValueError, match="search must be one of"):
        s08.config(256, search="binary")
    with pytest.raises(ValueError, match="unroll <= 16 and threads a multiple of 32"):
        s08.config(256, threads=100)

    class P:
        shape = (2, 10, 20, 8)
    with pytest.raises(TypeError, match="unknown parameter.*'tpw'"):
        s08.launch(P(), tpw=4)


def test_a_problem_too_large_for_32_bit_offsets_is_refused():
    class Huge:                     # only the shape is read before the refusal
        shape = (64, 2 ** 22, 10, 256)
    with pytest.raises(ValueError, match=r"8,589,934,592 vectors of 8.*offsets are 32-bit"):
        s08.launch(Huge())


def test_plan_counts_warps_per_batch_row():
    class P:
        shape = (3, 100, 10, 16)
    plan = s08.plan(P(), targets_per_warp=4)
    assert plan["warps"] == 3 * 3 and plan["blocks"] == 3 and plan["config"]["VEC"] == 8     # 4 warps a block
    assert s08.plan(P(), targets_per_warp=32)["warps"] == 3
    assert s08.plan(P())["config"]["TPW"] == 32           # "auto": 2 vectors a row, so 32 targets (at most)


@pytest.mark.parametrize("D, tpw, ppl", [(256, 4, 2), (64, 16, 2), (128, 8, 2), (512, 2, 2), (1024, 1, 2),
                                         (8, 32, 1), (24, 32, 1), (36, 14, 1), (37, 3, 1), (2, 32, 1)])
def test_auto_targets_and_vectors_a_lane_follow_d(D, tpw, ppl):
    # "auto": 128 output vectors a warp (4 a lane); 2 vectors a lane where a row's vector count is even
    cfg = s08.config(D)
    assert (cfg["TPW"], cfg["PPL"]) == (tpw, ppl)
    assert s08.config(D, vectors_per_lane=1)["PPL"] == 1
    assert s08.lane_vectors(48, 4) == 3 and s08.lane_vectors(64, 8) == 8 and s08.lane_vectors(40, 4) == 1


EMULATED_CASES = [(2, 200, 21, 37, True), (2, 200, 21, 37, False), (1, 2, 133, 1, True), (1, 23, 19, 7, False),
                  (1, 60, 17, 264, True), (1, 60, 17, 272, False),
                  (1, 20000, 40, 8, True),      # S > 4096: the window search narrows more than once
                  (2, 5000, 300, 16, True),     # sparse targets: many leave the window and search the row
                  (3, 50, 7, 24, True), (2, 64, 200, 12, False)]
VARIANTS = [{}, {"search": "lane"}, {"search": "prepass"}, {"search": "prepass", "targets_per_warp": 32, "pdl": False},
            {"targets_per_warp": 32}, {"targets_per_warp": 7, "unroll": 3, "min_blocks": 0, "threads": 64},
            {"targets_per_warp": 1, "streaming_stores": True}, {"bf16_cvt": False},
            {"vectors_per_lane": 1, "targets_per_warp": 4}, {"vectors_per_lane": 4, "unroll": 2, "targets_per_warp": 5},
            {"trigger": True}, {"search": "prepass", "trigger": True}]


def _right_in_the_emulator(make, params, rng):
    """Run every EMULATED_CASES shape, its inputs from make(B, S, T, D, sorted, rng), and judge each output."""
    for B, S, T, D, srt in EMULATED_CASES:
        args = make(B, S, T, D, srt, rng)
        p = resample.upload(*args)
        p.poison()
        with emulate.emulating("lazy"):
            s08.launch(p, **params)
        verdict = resample.judge(p.result(), *args)
        assert verdict.ok, f"{(B, S, T, D, srt)} {params}: {verdict}"


@needs_simulator
@pytest.mark.parametrize("params", VARIANTS, ids=[str(v) for v in VARIANTS])
def test_every_variant_is_right_in_the_emulator(params):
    _right_in_the_emulator(lambda B, S, T, D, srt, rng: inputs.random_problem(B, S, T, D, sorted_targets=srt, rng=rng),
                           params, np.random.default_rng(8))


def uneven_problem(B, S, T, D, sorted_targets, rng):
    """Source times far from evenly spread (log-normal steps): the interpolation guess's window often misses, so
    the probes' window and the whole-row search run too."""
    _, feats, _ = inputs.random_problem(B, S, T, D, rng=rng)
    times = (np.cumsum(np.exp(rng.normal(0, 1.5, (B, S))) + 0.05, axis=1) / 8).astype(np.float32)
    targets = rng.uniform(times[:, :1] - 1, times[:, -1:] + 1, (B, T)).astype(np.float32)
    return times, feats, np.sort(targets, axis=1) if sorted_targets else targets


@needs_simulator
@pytest.mark.parametrize("params", [{}, {"targets_per_warp": 32}], ids=["defaults", "32 targets a warp"])
def test_uneven_times_stay_right(params):
    _right_in_the_emulator(uneven_problem, params, np.random.default_rng(9))


# ------------------------------------------------------------------------------------------ the lab
def _region():
    path = str(s08.SOURCE.relative_to(notebooks.PACKAGE))
    return notebooks.strip_markers(notebooks.region_source(path))


def test_the_own_values_hint_reads_the_code():
    assert not s08._own_values_used(_region())
    assert s08._own_values_used("x = wt * 2;") and s08._own_values_used("int a = __shfl_sync(m, src, 0) + dst32;")
    assert not s08._own_values_used("int a = __shfl_sync(0xffffffffu, src, i), b = __shfl_sync(m, wt, i);")
    assert not s08._shuffles_from_own_lane(_region())
    assert s08._shuffles_from_own_lane("w = __shfl_sync(0xffffffffu, wt, lane);")
    assert not s08._shuffles_from_own_lane("w = __shfl_sync(0xffffffffu, wt, lane_of_target);")


@needs_simulator
def test_the_solution_passes_in_the_emulator(capsys):
    assert resample.grade(s08.NAME, _region()), capsys.readouterr().out
    assert "emulator" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ GPU
LAUNCHES = [pytest.param(s08.launch, marks=pytest.mark.gpu, id="window"),
            pytest.param(lambda p: s08.launch(p, search="lane"), marks=pytest.mark.gpu, id="lane"),
            pytest.param(lambda p: s08.launch(p, search="prepass"), marks=pytest.mark.gpu, id="prepass")]


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("case", EDGE, ids=EDGE_IDS)
def test_edge_cases(launch, case):
    _, st, sf, tt = case
    verdict = check.check_on(launch, st, sf, tt)
    assert verdict.ok, str(verdict)


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("B, S, T, D, srt", RANDOM)
def test_random(launch, B, S, T, D, srt):
    verdict = check.check_launch(launch, B, S, T, D, sorted_targets=srt)
    assert verdict.ok, str(verdict)


GPU_VARIANTS = VARIANTS + [{"targets_per_warp": 2, "search": "prepass"}, {"targets_per_warp": 16, "unroll": 2},
                           {"vectors_per_lane": 8, "min_blocks": 4},
                           {"threads": 1024, "min_blocks": 2}, {"threads": 32, "min_blocks": 0}]


@pytest.mark.gpu
@pytest.mark.parametrize("params", GPU_VARIANTS, ids=[str(v) for v in GPU_VARIANTS])
@pytest.mark.parametrize("srt", [True, False])
def test_variants(params, srt):
    verdict = check.check_launch(s08.launch, 2, 6000, 1100, 40, sorted_targets=srt, **params)
    assert verdict.ok, str(verdict)


@pytest.mark.gpu
@pytest.mark.parametrize("srt", [True, False])
def test_uneven_times(srt):
    args = uneven_problem(3, 5000, 4000, 64, srt, np.random.default_rng(10))
    verdict = check.check_on(s08.launch, *args)
    assert verdict.ok, str(verdict)


@pytest.mark.gpu
def test_the_prepass_pairs_match_numpy():
    st, sf, tt = inputs.random_problem(3, 777, 1500, 16, sorted_targets=False, rng=4)
    p = resample.upload(st, sf, tt)
    s08.launch(p, search="prepass")
    pairs = p._pairs08.copy_to_host().reshape(3, 1500, 2)
    for b in range(3):
        hi = np.clip(np.searchsorted(st[b], tt[b], side="right"), 1, 776)
        assert np.array_equal(pairs[b, :, 0], hi - 1)
        w = np.clip((tt[b] - st[b, hi - 1]) / (st[b, hi] - st[b, hi - 1]), 0, 1)
        np.testing.assert_allclose(pairs[b, :, 1].view(np.float32), w, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_programmatic_dependent_launch_gives_the_same_bits():
    st, sf, tt = inputs.random_problem(4, 3000, 5000, 64, rng=5)
    p = resample.upload(st, sf, tt)
    outs = []
    for params in ({"search": "prepass", "pdl": True}, {"search": "prepass", "pdl": False}, {"trigger": True},
                   {"search": "prepass", "trigger": True}):
        p.poison()
        for _ in range(3):      # back to back: with trigger, each launch may begin under the last one's tail
            s08.launch(p, **params)
        outs.append(p.out.copy_to_host())
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


@pytest.mark.gpu
def test_benchmark_size():
    verdict = check.check_launch(s08.launch, 64, 4096, 4096, 256, rng=0)
    assert verdict.ok, str(verdict)
