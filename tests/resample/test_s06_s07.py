"""06 cp.async and 07 TMA: the C++ rungs.

CPU (no GPU needed): both kernels compile to sm_90a cubins, their SASS has the instructions the lessons are
about (LDGSTS for cp.async, UTMALDG/UTMASTG for TMA, F2FP for the one-instruction bf16 rounding), the host's
shared-memory layout agrees with the kernel's, and run() says what the stage needs on a machine that cannot
run it.
GPU: the edge cases every stage must pass, random cases (a row of source times too long for the prepass's
shared memory too), parameter variants (pipeline depth, box and window shapes, the TMA store, both searches,
both roundings, few blocks so the ring wraps and shares end in mid-row), the prepass's (lo, w) pairs against
NumPy, both tensor-map paths giving identical output, the benchmark size once, and compute-sanitizer
memcheck/racecheck on small problems.
"""
import functools
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cudabook import device, nvrtc, resample
from cudabook.resample import checking as check
from cudabook.resample import inputs, s06_cp_async as s06, s07_tma as s07
from helpers import sass_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------ CPU

def test_stages_are_listed():
    assert "06_cp_async" in resample.STAGES and "07_tma" in resample.STAGES
    assert resample.stage(6) is s06 and resample.stage("07") is s07
    assert s06.TITLE == "cp.async pipeline" and s07.TITLE == "TMA bulk tensor copies"


@pytest.mark.parametrize("D", [256, 12, 6])          # 16-, 8- and 4-byte copies
def test_06_sass_has_ldgsts(D):
    sass_or_skip()
    cubin = s06.compile_cubin("sm_90a", D=D)
    copies = nvrtc.sass_lines(cubin, r"^LDGSTS", kernel=s06.KERNEL)
    assert copies, "no cp.async (LDGSTS) instructions in the 06 kernel"
    if D == 256:
        assert any("BYPASS.128" in c for c in copies), copies[:5]   # 16-byte copies that skip L1 (.cg)
    assert nvrtc.sass_lines(cubin, r"LDGDEPBAR|DEPBAR", kernel=s06.KERNEL)   # commit_group / wait_group
    assert nvrtc.sass_lines(cubin, r"^F2FP\.BF16", kernel=s06.KERNEL)       # cvt.rn.bf16x2.f32
    assert not nvrtc.sass_lines(s06.compile_cubin("sm_90a", D=D, bf16_cvt=False), r"^F2FP", kernel=s06.KERNEL)


def test_06_compiles_for_ampere():
    assert s06.compile_cubin("sm_80")[:4] == b"\x7fELF"


def test_07_sass_has_utmaldg():
    sass_or_skip()
    cubin = s07.compile_cubin("sm_90a")
    assert nvrtc.sass_lines(cubin, r"^UTMALDG\.3D", kernel=s07.KERNEL)       # feature rows: [B, S, D] boxes
    assert nvrtc.sass_lines(cubin, r"^F2FP\.BF16", kernel=s07.KERNEL)        # cvt.rn.bf16x2.f32
    assert not nvrtc.sass_lines(cubin, r"^UTMALDG\.2D", kernel=s07.KERNEL)   # the prepass: no source times here
    assert nvrtc.sass_lines(cubin, r"^LDS", kernel=s07.INTERVALS)            # the prepass searches shared memory
    assert not nvrtc.sass_lines(s07.compile_cubin("sm_90a", bf16_cvt=False), r"^F2FP", kernel=s07.KERNEL)
    times_by_tma = s07.compile_cubin("sm_90a", search="inline", times_tma=True)
    assert nvrtc.sass_lines(times_by_tma, r"^UTMALDG\.2D", kernel=s07.KERNEL)   # source times: [B, S] boxes
    assert nvrtc.sass_lines(cubin, r"SYNCS", kernel=s07.KERNEL)        # the mbarrier operations
    assert not nvrtc.sass_lines(cubin, r"^UTMASTG", kernel=s07.KERNEL)
    stored = s07.compile_cubin("sm_90a", tma_store=True)
    assert nvrtc.sass_lines(stored, r"^UTMASTG", kernel=s07.KERNEL)
    # programmatic dependent launch: the prepass waits for the kernel before it, then lets the streaming kernel
    # start, which waits before the pairs
    assert nvrtc.sass_lines(cubin, r"^ACQBULK", kernel=s07.INTERVALS)     # griddepcontrol.wait
    assert nvrtc.sass_lines(cubin, r"^PREEXIT", kernel=s07.INTERVALS)     # griddepcontrol.launch_dependents
    assert nvrtc.sass_lines(cubin, r"^ACQBULK", kernel=s07.KERNEL)
    assert nvrtc.waits_first_in_sass(cubin, s07.INTERVALS)    # before it reads anything, and before it triggers


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("S, srt", [(3000, True), (3000, False), (9000, True)])    # 9000: a prepass without smem
def test_07_programmatic_dependent_launch_gives_the_same_bits(S, srt):
    st, sf, tt = inputs.random_problem(4, S, 5000, 64, sorted_targets=srt, rng=6)
    p = resample.upload(st, sf, tt)
    outs = []
    for pdl, own in ((True, "auto"), (True, 0), (True, 10**9), (False, "auto")):   # own: self_search_blocks
        p.poison()
        # pairs left from an earlier launch would hide a read before the wait: garbage in the buffer first
        s07.pairs_buffer(4 * 5000).copy_to_device(np.full((4 * 5000, 2), 0x7F7F7F7F, np.int32))
        s07.launch(p, pdl=pdl, self_search_blocks=own)
        outs.append(p.out.copy_to_host())
    _agree_and_are_right(outs, st, sf, tt)


def _agree_and_are_right(outs, st, sf, tt):
    """The outputs of several ways of computing one problem: the same bits, and right against the reference."""
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    ref, scale = inputs.reference_with_scale(st, sf, tt)
    assert check.compare(outs[0].view(inputs.BF16), ref, scale).ok


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("params", [{}, {"self_search_blocks": 10**9}, {"self_search_blocks": 0}])
def test_07_and_08_calls_back_to_back_on_different_problems_stay_right(params):
    # consecutive calls overlap their launches (PDL) and 07's calls share one pairs buffer: two problems of one
    # shape, alternated with no synchronisation between them, must each come out right (a prepass that ran
    # early, or one still writing pairs when the next call reads them, would mix the two problems' pairs)
    from cudabook.resample import s08_fused_gather as s08
    shape = (8, 2000, 1500, 64)      # 07: one wave of blocks, so "auto" asks for every block
    probs = [inputs.random_problem(*shape, rng=r) for r in (11, 12)]
    ps = [resample.upload(*a) for a in probs]
    for launch, kw in ((s07.launch, params), (s08.launch, {}), (s08.launch, {"search": "prepass"})):
        if launch is s08.launch and params:
            continue
        for p in ps:
            p.poison()
        for _ in range(20):
            for p in ps:
                launch(p, **kw)
        for p, a in zip(ps, probs):
            assert resample.judge(p.result(), *a).ok, (launch.__module__, kw)


@pytest.mark.gpu
@pytest.mark.hopper
def test_07_with_pdl_the_last_streaming_block_always_waits_for_the_prepass(monkeypatch):
    # the next call's prepass waits only for the kernel before it (this call's streaming kernel): were no
    # streaming block to wait for this call's prepass, that kernel could end first, and the next prepass would
    # write pairs while this one still does. So with PDL the last block never searches for itself, even when
    # self_search_blocks asks for every block (the problem below is one wave: "auto" asks for all of them)
    seen = []
    launch = nvrtc.Kernel.launch
    monkeypatch.setattr(nvrtc.Kernel, "launch", lambda self, grid, block, args, *a, pdl=False, **kw: (
        seen.append((self.name, pdl, grid, args[-1])), launch(self, grid, block, args, *a, pdl=pdl, **kw))[1])
    st, sf, tt = inputs.random_problem(2, 500, 700, 64, rng=7)
    p = resample.upload(st, sf, tt)
    for params in ({}, {"self_search_blocks": 10**9}, {"self_search_blocks": 1}, {"pdl": False},
                   {"pdl": False, "self_search_blocks": 10**9}):
        seen.clear()
        s07.launch(p, **params)
        (pre, pre_pdl, _, _), (main, main_pdl, grid, own) = seen
        assert (pre, main) == (s07.INTERVALS, s07.KERNEL)
        pdl = params.get("pdl", True)
        assert pre_pdl is pdl and main_pdl is pdl, (params, seen)
        if pdl:
            assert own == min(params.get("self_search_blocks", 10**9), grid - 1), (params, seen)
        else:
            assert own == params.get("self_search_blocks", 0), (params, seen)


@pytest.mark.gpu
@pytest.mark.hopper
def test_07_and_08_launch_a_source_without_the_wait_the_ordinary_way(monkeypatch):
    # a learner's copy of the kernel that lacks griddepcontrol.wait must not be launched with PDL (it would race)
    from cudabook.resample import s08_fused_gather as s08
    seen = []
    launch = nvrtc.Kernel.launch
    monkeypatch.setattr(nvrtc.Kernel, "launch", lambda self, *a, pdl=False, **kw: (seen.append(pdl),
                                                                                  launch(self, *a, pdl=pdl, **kw))[1])
    st, sf, tt = inputs.random_problem(2, 500, 700, 64, rng=7)
    p = resample.upload(st, sf, tt)
    for module, params in ((s07, {}), (s08, {"search": "prepass"}), (s08, {})):
        source = module.SOURCE.read_text()
        without = source.replace('asm volatile("griddepcontrol.wait;" ::: "memory");', "")
        assert without != source
        for text, expected in ((source, True), (without, False)):
            seen.clear()
            module.launch(p, kernel=text, **params)
            assert seen == [expected] * len(seen) and len(seen) == (2 if params or module is s07 else 1), \
                (module.NAME, params, seen)


def test_no_register_spills():
    try:
        nvrtc.cuobjdump_path()
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    for cubin, name in ((s06.compile_cubin(), s06.KERNEL), (s07.compile_cubin(), s07.KERNEL),
                        (s07.compile_cubin(), s07.INTERVALS), (s07.compile_cubin(search="inline"), s07.KERNEL)):
        assert nvrtc.resource_usage(cubin)[name]["local"] == 0


@pytest.mark.parametrize("D, params", [(256, {}), (12, {}), (6, {}), (520, {"stages": 3, "window_rows": 20}),
                                       (64, {"targets_per_item": 64, "threads": 128})])
def test_06_host_layout_matches_kernel(D, params):
    cfg = s06.config(D, **params)
    nvrtc.compile(s06.source(), arch="sm_90a", name="cp_async.cu", include_path=[s06.KERNEL_DIR],
                  defines={**cfg, "EXPECT_SMEM": s06.smem_bytes(cfg)})


@pytest.mark.parametrize("D, params", [(256, {}), (8, {}), (136, {"box_rows": 3}), (64, {"tma_store": True}),
                                       (256, {"targets_per_item": 20, "window_rows": 30, "stages": 3}),
                                       (256, {"times_tma": True, "schedule": "strided"}),
                                       (256, {"search": "inline"}), (136, {"search": "inline", "box_rows": 3}),
                                       (64, {"search": "inline", "tma_store": True}),
                                       (256, {"search": "inline", "targets_per_item": 20, "window_rows": 30}),
                                       (256, {"search": "inline", "times_tma": True, "schedule": "strided"}),
                                       (256, {"search": "producer"}), (136, {"search": "producer", "box_rows": 3}),
                                       (64, {"search": "producer", "tma_store": True, "schedule": "contiguous"}),
                                       (256, {"search": "producer", "targets_per_item": 64, "window_rows": 80}),
                                       (256, {"persistent": False, "stages": 1}), (64, {"stages": 1, "tma_store": True})])
def test_07_host_layout_matches_kernel(D, params):
    cfg = s07.config(D, **params)
    assert cfg["BOXR"] * cfg["DC"] * 2 % 128 == 0 and cfg["WMAX"] % cfg["BOXR"] == 0 and cfg["WMAX"] % 4 == 0
    nvrtc.compile(s07.source(), arch="sm_90a", name="tma.cu", include_path=[s07.KERNEL_DIR],
                  defines={**cfg, "EXPECT_SMEM": s07.smem_bytes(cfg)})


def test_defaults_fit_two_blocks_per_hopper_sm():
    # 227 KiB of shared memory per SM on H100/H200: two blocks of each kernel fit at the benchmark's D = 256
    assert 2 * s06.smem_bytes(s06.config(256)) <= 227 * 1024
    assert 2 * s07.smem_bytes(s07.config(256)) <= 227 * 1024


def test_sources_have_lab_markers():
    for module in (s06, s07):
        text = module.source()
        assert text.count("// >>> lab:") == 1 and text.count("// <<< lab") == 1


def test_paths_for_awkward_shapes():
    class P:   # plan() reads only the shape
        def __init__(self, D):
            self.shape = (2, 10, 20, D)
    assert s07.plan(P(12))["path"].startswith("fallback")     # 24-byte rows: not whole 16-byte chunks
    assert s07.plan(P(16))["path"] == "tma + prepass"
    assert s07.plan(P(16), search="inline")["path"] == "tma"
    assert s07.plan(P(16), search="inline", times_tma=True)["config"]["TIMES_TMA"] == 0   # S = 10: rows not 16-byte multiples
    assert s07.config(16, S=12, search="inline", times_tma=True)["TIMES_TMA"] == 1
    assert s07.config(16, S=12, times_tma=True)["TIMES_TMA"] == 0   # the prepass path reads no source times
    assert s06.plan(P(7))["path"].startswith("fallback")
    assert s06.plan(P(6))["config"]["VEC"] == 2


@pytest.mark.skipif(device.gpu() is not None, reason="this machine has a GPU")
@pytest.mark.parametrize("name, need", [("06_cp_async", "8.0"), ("07_tma", "9.0")])
def test_run_without_gpu_says_what_is_needed(name, need):
    st, sf, tt = inputs.random_problem(1, 5, 4, 3, rng=0)
    with pytest.raises(resample.StageUnavailable) as info:
        resample.run(name, st, sf, tt)
    message = str(info.value)
    assert name in message and f"compute capability {need}" in message and "this machine has none" in message


# ------------------------------------------------------------------------------------------ GPU

def edge_cases():
    """(id, src_times, src_feats, tgt_times): the cases every stage must pass."""
    rng = np.random.default_rng(7)
    out = []

    def add(name, B, S, T, D, sorted_targets=True):
        out.append((name,) + inputs.random_problem(B, S, T, D, sorted_targets=sorted_targets, rng=rng))

    add("S=2", 3, 2, 300, 16)
    add("D=1", 2, 200, 300, 1)
    add("D=7 odd", 2, 200, 300, 7)
    add("D=12 not a multiple of 8", 2, 200, 300, 12)
    add("D=6 (4-byte copies)", 2, 200, 300, 6)
    add("D=520 several chunks", 2, 150, 100, 520)
    add("unsorted", 2, 300, 500, 64, sorted_targets=False)
    add("B=1", 1, 500, 900, 32)
    st, sf, _ = inputs.random_problem(2, 100, 1, 24, rng=rng)
    outside = np.concatenate([st[:, :1] - np.float32(5), st[:, :1] - np.float32(0.01),
                              st[:, -1:] + np.float32(0.01), st[:, -1:] + np.float32(1e3)], axis=1)
    out.append(("targets outside the source range", st, sf, np.sort(outside, axis=1).astype(np.float32)))
    out.append(("targets exactly on source times", st, sf, st.copy()))
    out.append(("T=0", st, sf, np.zeros((2, 0), np.float32)))
    return out


EDGE = edge_cases()
EDGE_IDS = [e[0] for e in EDGE]

RANDOM = [(3, 777, 1500, D, srt) for D in (1, 7, 64, 129, 256) for srt in (True, False)]
RANDOM += [(2, 9000, 700, 64, True)]   # a row of source times longer than the prepass keeps in shared memory

V06 = [{}, {"schedule": "strided"}, {"stages": 2}, {"stages": 3, "blocks": 3}, {"window_rows": 6, "blocks": 5}, {"threads": 64},
       {"targets_per_item": 64, "d_chunk": 64}, {"targets_per_item": 7, "window_rows": 9, "blocks": 2},
       {"bf16_cvt": False}]
V07 = [{}, {"pdl": False}, {"schedule": "strided"}, {"tma_store": True}, {"box_rows": 1}, {"box_rows": 16, "window_rows": 64}, {"stages": 2, "blocks": 3},
       {"window_rows": 8, "blocks": 5}, {"consumer_warps": 2}, {"targets_per_item": 64, "d_chunk": 64},
       {"targets_per_item": 8, "tma_store": True, "blocks": 2}, {"streaming_stores": True},
       {"tensor_map": "cuda_core"}, {"tensor_map": "cuda_core", "tma_store": True, "stages": 3},
       # shares that end in mid-row (a block's last run is short): with the TMA store too
       {"blocks": 7}, {"tma_store": True, "blocks": 5}, {"d_chunk": 32, "blocks": 4}, {"bf16_cvt": False},
       {"stages": 3, "window_rows": 40}, {"targets_per_item": 24, "box_rows": 16, "window_rows": 32},
       {"schedule": "contiguous"}, {"schedule": "contiguous", "blocks": 7},
       {"schedule": "contiguous", "tma_store": True, "blocks": 5},
       # the producer warp searches (one launch)
       {"search": "producer"}, {"search": "producer", "blocks": 7}, {"search": "producer", "schedule": "contiguous"},
       {"search": "producer", "schedule": "strided", "blocks": 3}, {"search": "producer", "window_rows": 8, "blocks": 5},
       {"search": "producer", "targets_per_item": 64, "d_chunk": 64}, {"search": "producer", "tma_store": True},
       # one block per item, no ring to speak of
       {"persistent": False, "stages": 1}, {"persistent": False}, {"persistent": False, "stages": 1, "d_chunk": 32},
       {"persistent": False, "stages": 1, "tma_store": True}, {"persistent": False, "stages": 1, "search": "inline"},
       {"persistent": False, "stages": 1, "search": "producer"}, {"stages": 1, "blocks": 3},
       # the defaults (one block per item, 4 consumer warps), alone and with a few of the knobs
       {"persistent": False, "stages": 1, "consumer_warps": 4},
       {"persistent": False, "stages": 1, "consumer_warps": 4, "d_chunk": 32},
       {"persistent": False, "stages": 1, "consumer_warps": 4, "tma_store": True},
       {"persistent": False, "stages": 1, "consumer_warps": 4, "blocks": 5},
       # the consumers search (the first version of this stage)
       {"search": "inline"}, {"search": "inline", "schedule": "strided"}, {"search": "inline", "blocks": 3},
       {"search": "inline", "tma_store": True, "blocks": 5}, {"search": "inline", "window_rows": 8, "blocks": 5}]

STAGES_GPU = [pytest.param(s06, marks=pytest.mark.gpu, id="06"),
              pytest.param(s07, marks=[pytest.mark.gpu, pytest.mark.hopper], id="07")]
# 07's persistent ring (a block walks many items through a ring of 2 stages), the base of the variants below
RING = {"persistent": True, "stages": 2, "schedule": "interleaved", "consumer_warps": 8}
# the edge and random cases for 07 run with its defaults (one block per item) and with the persistent ring
LAUNCHES_GPU = STAGES_GPU + [
    pytest.param(functools.partial(s07.launch, persistent=False, stages=1, consumer_warps=8),
                 marks=[pytest.mark.gpu, pytest.mark.hopper], id="07-one-item-per-block-8-warps"),
    pytest.param(functools.partial(s07.launch, **RING), marks=[pytest.mark.gpu, pytest.mark.hopper], id="07-ring"),
    pytest.param(functools.partial(s07.launch, **{**RING, "schedule": "strided"}),
                 marks=[pytest.mark.gpu, pytest.mark.hopper], id="07-ring-strided")]


def _launch_of(module):
    return module if isinstance(module, functools.partial) else module.launch


@pytest.mark.parametrize("module", LAUNCHES_GPU)
@pytest.mark.parametrize("case", EDGE, ids=EDGE_IDS)
def test_edge_cases(module, case):
    _, st, sf, tt = case
    verdict = check.check_on(_launch_of(module), st, sf, tt)
    assert verdict.ok, str(verdict)


@pytest.mark.parametrize("module", LAUNCHES_GPU)
@pytest.mark.parametrize("B, S, T, D, srt", RANDOM)
def test_random(module, B, S, T, D, srt):
    verdict = check.check_launch(_launch_of(module), B, S, T, D, sorted_targets=srt)
    assert verdict.ok, str(verdict)


@pytest.mark.gpu
@pytest.mark.parametrize("params", V06, ids=[str(v) for v in V06])
@pytest.mark.parametrize("srt", [True, False])
def test_06_variants(params, srt):
    verdict = check.check_launch(s06.launch, 2, 600, 1100, 40, sorted_targets=srt, **params)
    assert verdict.ok, str(verdict)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("params", V07, ids=[str(v) for v in V07])
@pytest.mark.parametrize("srt", [True, False])
def test_07_variants(params, srt):
    verdict = check.check_launch(s07.launch, 2, 600, 1100, 72, sorted_targets=srt, **{**RING, **params})
    assert verdict.ok, str(verdict)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("params", [{}, {"tma_store": True}])
def test_07_tensor_map_paths_agree(params):
    st, sf, tt = inputs.random_problem(3, 1000, 2000, 256, rng=11)
    outs = []
    for path in ("driver", "cuda_core"):
        p = resample.upload(st, sf, tt)
        p.poison()
        s07.launch(p, tensor_map=path, **params)
        outs.append(p.out.copy_to_host())
    _agree_and_are_right(outs, st, sf, tt)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("srt", [True, False])
def test_07_searches_and_schedules_agree(srt):
    # every way of finding the intervals and of handing out the items computes the same bits
    st, sf, tt = inputs.random_problem(3, 900, 1700, 64, sorted_targets=srt, rng=13)
    p = resample.upload(st, sf, tt)
    outs = {}
    for search in s07.SEARCHES:
        for schedule in s07.SCHEDULES:
            p.poison()
            s07.launch(p, search=search, schedule=schedule, blocks=11, persistent=True, stages=2)
            outs[search, schedule] = p.out.copy_to_host()
        p.poison()
        s07.launch(p, search=search, persistent=False, stages=1)
        outs[search, "one item per block"] = p.out.copy_to_host()
    for own in (5, 10**9):                    # the first `own` blocks find their own pairs
        p.poison()
        s07.launch(p, self_search_blocks=own)
        outs["prepass", f"{own} blocks search"] = p.out.copy_to_host()
        p.poison()
        s07.launch(p, self_search_blocks=own, blocks=11, persistent=True, stages=2)
        outs["prepass", f"{own} blocks search, a ring"] = p.out.copy_to_host()
    first = next(iter(outs.values()))
    assert all(np.array_equal(first, o) for o in outs.values()), [k for k, o in outs.items() if not np.array_equal(first, o)]
    ref, scale = inputs.reference_with_scale(st, sf, tt)
    assert check.compare(first.view(inputs.BF16), ref, scale).ok


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("B, S, T, srt", [(2, 777, 1500, True), (2, 777, 1500, False), (2, 9000, 700, True),
                                          (3, 100, 5, True), (1, 2, 40, True)])
def test_07_prepass_pairs(B, S, T, srt):
    # the prepass alone: every target's (lo, w), against NumPy (the same float32 arithmetic: bit for bit)
    st, sf, tt = inputs.random_problem(B, S, T, 8, sorted_targets=srt, rng=5)
    p = resample.upload(st, sf, tt)
    parts = s07.parts(p)
    parts["prepass"]()
    got = s07.pairs_buffer(B * T).copy_to_host()[:B * T].reshape(B, T, 2)
    lo = np.clip(np.stack([np.searchsorted(st[b], tt[b], side="right") for b in range(B)]) - 1, 0, S - 2)
    t0, t1 = np.take_along_axis(st, lo, 1), np.take_along_axis(st, lo + 1, 1)
    w = np.clip((tt - t0) / (t1 - t0), np.float32(0), np.float32(1)).astype(np.float32)
    assert np.array_equal(got[..., 0], lo)
    assert np.array_equal(got[..., 1].view(np.float32), w)


@pytest.mark.gpu
def test_run_api():
    st, sf, tt = inputs.random_problem(2, 100, 150, 16, rng=3)
    for name in ("06_cp_async",) + (("07_tma",) if s07.unavailable() is None else ()):
        got = resample.run(name, st, sf, tt)
        assert got.dtype == inputs.BF16 and got.shape == (2, 150, 16)
        ref, scale = inputs.reference_with_scale(st, sf, tt)
        assert check.compare(got, ref, scale).ok


@pytest.mark.gpu
@pytest.mark.parametrize("module", STAGES_GPU)
def test_benchmark_size(module):
    verdict = check.check_launch(module.launch, 64, 4096, 4096, 256, rng=0)
    assert verdict.ok, str(verdict)


def _sanitizer():
    return shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.access(p, os.X_OK)), None)


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer(tool):
    exe = _sanitizer()
    if exe is None:
        pytest.skip("compute-sanitizer is not on PATH (it comes with the CUDA toolkit)")
    run = subprocess.run([exe, "--tool", tool, sys.executable, str(ROOT / "tools" / "sanitize.py"), "--inner",
                          "--track", "resample", "msda", "attention"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    text = run.stdout + run.stderr
    print(text[-3000:])
    # memcheck ends with "ERROR SUMMARY: 0 errors"; racecheck with "RACECHECK SUMMARY: 0 hazards displayed
    # (0 errors, 0 warnings)"
    summary = "ERROR SUMMARY: 0 errors" if tool == "memcheck" else "RACECHECK SUMMARY: 0 hazards displayed (0 errors"
    assert summary in text, text[-3000:]
    assert run.returncode == 0, text[-3000:]


# Last in the file on purpose: the times-by-TMA path is the newest, and a kernel fault ends the process's CUDA
# context for every test after it.
@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("B, S, T, D, srt, params", [
    (2, 600, 1100, 72, True, {}), (2, 600, 1100, 72, False, {}), (3, 777, 1500, 64, True, {}),   # S % 4 != 0
    (2, 600, 1100, 72, True, {"schedule": "strided", "blocks": 3}), (2, 64, 900, 16, True, {"window_rows": 8}),
    (2, 600, 1100, 72, True, {"tensor_map": "cuda_core"}), (64, 4096, 4096, 256, True, {})])
def test_07_times_by_tma(B, S, T, D, srt, params):
    verdict = check.check_launch(s07.launch, B, S, T, D, sorted_targets=srt, search="inline", times_tma=True,
                                 **{**RING, **params})
    assert verdict.ok, str(verdict)
