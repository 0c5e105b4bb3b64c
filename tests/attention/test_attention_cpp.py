"""The attention track's CUDA C++ rungs: 04 (mma.sync, a cp.async K/V ring; sm_80+), 05 (TMA + wgmma; sm_90a) and
06 (a producer warpgroup, consumers in ping-pong; sm_90a).

Both compile here with the instructions they are about and without spills; rung 05's tensor maps pass the
validator. Rung 04 runs on the CPU in the emulator (cudabook.emulate) on ragged shapes with every tile size,
pipeline depth and warp count the tests name, against the float64 reference. Lab 04's planted mistakes fail
with a message that points at them (in the emulator, or by the grader's reading of the text: the mistakes are
cudabook/attention/mistakes.py's, graded by tests/attention/test_attention_mistakes.py), and its solution passes. Lab
05 (wgmma) cannot be emulated: on a CPU the grader compiles it and says that a Hopper GPU grades it; on a Hopper
GPU its solution passes (and its planted mistakes fail).
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cudabook import SIMULATOR, attention, emulate, labs, notebooks, nvrtc, tma
from cudabook.attention import s04_mma_cp_async as s04
from cudabook.attention import s05_wgmma_tma as s05
from cudabook.attention import s06_warp_specialized as s06
from cudabook.attention.mistakes import MISTAKES

HOST_CXX = bool(shutil.which("g++") or shutil.which("clang++") or shutil.which("c++"))
EMULATOR = HOST_CXX and SIMULATOR         # the emulator works on the simulator's host memory
needs_emulator = pytest.mark.skipif(not EMULATOR, reason="the emulator needs a host C++ compiler and the simulator "
                                                         "(no GPU); a GPU runs rung 04 for real")


def _region(module):
    return notebooks.strip_markers(notebooks.region_source(str(module.SOURCE.relative_to(notebooks.PACKAGE))))


# ------------------------------------------------------------------------------------ machine code

@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_04_compiles_to_tensor_core_instructions_without_spills(d, causal):
    cubin = s04.compile_cubin(d=d, causal=causal)
    k = s04.KERNEL
    assert nvrtc.sass_lines(cubin, r"HMMA\.16816\.F32\.BF16", kernel=k), "no mma.sync (HMMA) in the SASS"
    assert nvrtc.sass_lines(cubin, r"LDSM\.16\.M88\.4", kernel=k), "no ldmatrix of Q and K (LDSM.16.M88.4)"
    assert nvrtc.sass_lines(cubin, r"LDSM\.16\.MT88\.4", kernel=k), "no transposing ldmatrix of V (LDSM.16.MT88.4)"
    assert nvrtc.sass_lines(cubin, r"LDGSTS", kernel=k), "no cp.async (LDGSTS)"
    assert nvrtc.resource_usage(cubin)[k]["local"] == 0, "rung 04 spills to local memory"


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_05_compiles_to_wgmma_and_tma_without_spills(d, causal):
    cubin = s05.compile_cubin(d=d, causal=causal)
    k = s05.KERNEL
    bkv = s05.config(d, causal)["BKV"]
    hgmma = nvrtc.sass_lines(cubin, r"HGMMA", kernel=k)
    s_ops = [i for i in hgmma if "tnspB" not in i]
    o_ops = [i for i in hgmma if "tnspB" in i]
    assert len(s_ops) == d // 16 and all(f"HGMMA.64x{bkv}x16.F32.BF16" in i for i in s_ops), hgmma
    assert len(o_ops) == bkv // 16 and all(f"HGMMA.64x{d}x16.F32.BF16" in i for i in o_ops), hgmma
    assert nvrtc.sass_lines(cubin, r"UTMALDG\.3D", kernel=k), "no 3-D TMA loads (UTMALDG.3D)"
    assert nvrtc.resource_usage(cubin)[k]["local"] == 0, "rung 05 spills to local memory"


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("overlap, persistent", [(True, True), (False, True), (True, False)])
def test_06_compiles_to_warp_specialised_wgmma_without_spills(d, causal, overlap, persistent):
    cubin = s06.compile_cubin(d=d, causal=causal, overlap=overlap, persistent=persistent)
    k = s06.KERNEL
    bkv = s06.config(d, causal)["BKV"]
    hgmma = nvrtc.sass_lines(cubin, r"HGMMA", kernel=k)
    s_ops = [i for i in hgmma if "tnspB" not in i]
    o_ops = [i for i in hgmma if "tnspB" in i]
    # S_0 on its own, S_t beside P_{t-1} V_{t-1} in the loop over unmasked tiles and again in the loop over
    # masked ones, then the last P V: each product three times
    assert len(s_ops) == 3 * d // 16 and all(f"HGMMA.64x{bkv}x16.F32.BF16" in i for i in s_ops), hgmma
    assert len(o_ops) == 3 * bkv // 16 and all(f"HGMMA.64x{d}x16.F32.BF16" in i for i in o_ops), hgmma
    assert nvrtc.sass_lines(cubin, r"UTMALDG\.3D", kernel=k), "no 3-D TMA loads (UTMALDG.3D)"
    regs = nvrtc.sass_lines(cubin, r"USETMAXREG", kernel=k)
    assert any("DEALLOC" in i for i in regs) and any("ALLOC" in i and "DEALLOC" not in i for i in regs), regs
    assert nvrtc.sass_lines(cubin, r"BAR\.ARV", kernel=k), "no named-barrier arrive (the ping-pong hand-over)"
    assert nvrtc.resource_usage(cubin)[k]["local"] == 0 and nvrtc.resource_usage(cubin)[k]["stack"] == 0, \
        "rung 06 spills to local memory"
    assert "serialized" not in nvrtc.compile_log(cubin), nvrtc.compile_log(cubin)


@pytest.mark.parametrize("module, params, rule", [
    (s04, dict(d=96), "d must be one of 64, 128, got 96"),
    (s04, dict(d=64, warps=3), "warps must be 1, 2, 4 or 8"),
    (s04, dict(d=64, bkv=24), "bkv .keys a tile. must be a multiple of 16"),
    (s04, dict(d=128, stages=1), "stages must be 2, 3 or 4"),
    (s05, dict(d=32), "d must be one of 64, 128, got 32"),
    (s05, dict(d=64, bkv=32), "bkv must be 64 or 128"),
    (s05, dict(d=128, warpgroups=4), "warpgroups must be 1, 2 or 3"),
    (s05, dict(d=128, stages=0), "stages must be 1 to 4"),
    (s06, dict(d=96), "d must be one of 64, 128, got 96"),
    (s06, dict(d=128, consumers=3), "consumers=3 needs d=64, got d=128"),
    (s06, dict(d=64, consumers=4), "consumers must be 1, 2 or 3"),
    (s06, dict(d=128, bkv=96), "bkv must be 64 or 128"),
    (s06, dict(d=64, stages=5), "stages must be 1 to 4"),
    (s06, dict(d=64, pingpong=1), "pingpong must be True or False"),
    (s06, dict(d=64, overlap="yes"), "overlap must be True or False"),
    (s06, dict(d=64, persistent=1), "persistent must be True or False"),
    (s06, dict(d=64, blocks=-1), "blocks must be a whole number >= 0"),
    (s06, dict(d=64, schedule="lazy"), 'schedule must be "static" or "dynamic"'),
    (s06, dict(d=64, head_group=-2), "head_group must be a whole number >= 0"),
])
def test_bad_constants_are_refused_with_the_rule(module, params, rule):
    d = params.pop("d")
    with pytest.raises(ValueError, match=rule):
        module.config(d, False, **params)


def test_an_unknown_parameter_is_named():
    q, k, v, causal = attention.random_problem(1, 1, 3, 3, 64)
    for stage in ("04", "05", "06"):
        with pytest.raises(TypeError, match="'tile'"):
            attention.stage(stage).launch(attention.upload(q, k, v, causal), tile=3)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("B, H, Nq, Nk", [(4, 16, 4096, 4096), (1, 3, 37, 100), (2, 1, 1, 1)])
@pytest.mark.parametrize("params", [{}, {"bkv": 64}, {"bkv": 128, "warpgroups": 3}, {"warpgroups": 1}])
def test_05_tensor_maps_pass_the_validator(B, H, Nq, Nk, d, params):
    maps = s05.tensor_maps(B, H, Nq, Nk, d, **params)
    cfg = s05.config(d, False, **params)
    rows = {"q": 64 * cfg["WGS"], "k": cfg["BKV"], "v": cfg["BKV"]}
    for name, args in maps.items():
        a = dict(args)
        assert tma.check_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), **a) is None
        n = Nq if name == "q" else Nk
        assert args["shape"] == (B * H, n, d) and args["box"] == (1, rows[name], 64), (name, args)
        assert args["swizzle"] == "128B" and args["box"][2] * 2 == 128      # a box row = the swizzle span


# ------------------------------------------------------------------------------------ rung 04, emulated

SHAPES = {False: [(2, 1, 37, 53), (1, 2, 70, 19)],        # (B, H, Nq, Nk): ragged, Nq != Nk, both ways
          True: [(1, 2, 45, 45), (1, 1, 18, 18)]}
PARAMS_04 = [{},                                          # warps 4, bkv 64, stages 2
             {"warps": 1, "bkv": 16, "stages": 3},
             {"warps": 2, "bkv": 32, "stages": 2}]


@needs_emulator
@pytest.mark.parametrize("params", PARAMS_04, ids=["defaults", "w1-bkv16-s3", "w2-bkv32-s2"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_04_is_right_in_the_emulator(d, causal, params):
    for B, H, Nq, Nk in SHAPES[causal]:
        args = attention.random_problem(B, H, Nq, Nk, d, causal=causal)
        p = attention.upload(*args)
        p.poison()
        with emulate.emulating():
            s04.launch(p, **params)
        verdict = attention.judge(p.result(), *args)
        assert verdict.ok, ((B, H, Nq, Nk, d, causal, params), verdict.message)


# ------------------------------------------------------------------------------------ rung 06's grid, emulated
# The emulated GPU has 2 SMs, so a persistent grid of 2 blocks (or `blocks`) walks several work tiles a block:
# the rings run on across tiles (stages=1 wraps them at every key tile), Q is reloaded after "Q empty", and a
# causal grid takes its tiles in the snake. Each case has more work tiles than blocks and more than one key tile.
GRID_06 = [(64, False, dict(B=1, H=3, Nq=200, Nk=150), {}),                     # 6 tiles on 2 blocks
           (64, True, dict(B=1, H=3, Nq=200, Nk=200), {}),                      # causal: the snake, 3 full rounds
           (64, True, dict(B=2, H=1, Nq=400, Nk=400), {"blocks": 3}),           # 3 blocks, 6 tiles: rounds of 3
           (128, True, dict(B=1, H=2, Nq=150, Nk=150), {"persistent": True, "stages": 1}),
           (128, False, dict(B=1, H=2, Nq=130, Nk=300), {"blocks": 1, "stages": 1}),   # one block does it all
           (128, True, dict(B=1, H=2, Nq=150, Nk=150), {"persistent": False}),
           (64, True, dict(B=2, H=1, Nq=400, Nk=400), {"blocks": 3, "schedule": "dynamic"}),
           (128, False, dict(B=1, H=2, Nq=130, Nk=300), {"blocks": 1, "schedule": "dynamic", "stages": 1}),
           (64, True, dict(B=1, H=3, Nq=200, Nk=200), {"head_group": 2}),       # groups of 2 heads and of 1
           (64, True, dict(B=1, H=3, Nq=200, Nk=200), {"schedule": "dynamic", "head_group": 2})]


@needs_emulator
@pytest.mark.parametrize("d, causal, size, params", GRID_06,
                         ids=["d64", "d64-causal", "d64-causal-3blocks", "d128-causal-persistent-s1",
                              "d128-1block-s1", "d128-causal-a-block-a-tile", "d64-causal-dynamic",
                              "d128-dynamic-1block-s1", "d64-causal-head-groups",
                              "d64-causal-dynamic-head-groups"])
def test_06_walks_its_work_tiles_right_in_the_emulator(d, causal, size, params):
    args = attention.random_problem(size["B"], size["H"], size["Nq"], size["Nk"], d, causal=causal)
    p = attention.upload(*args)
    p.poison()
    with emulate.emulating():
        s06.launch(p, **params)
    verdict = attention.judge(p.result(), *args)
    assert verdict.ok, ((d, causal, size, params), verdict.message)


@needs_emulator
def test_06_dynamic_schedule_leaves_its_counters_at_zero_for_the_next_launch():
    # the last block to finish sets the claim counters back to zero: a second launch on the same problem (the
    # same counters) is right too
    args = attention.random_problem(1, 3, 200, 200, 64, causal=True)
    p = attention.upload(*args)
    for _ in range(2):
        p.poison()
        with emulate.emulating():
            s06.launch(p, persistent=True, schedule="dynamic")
        assert attention.judge(p.result(), *args).ok
        assert p.scratch("06_claimed", (2,), "int32").copy_to_host().tolist() == [0, 0]


@needs_emulator
def test_a_ragged_end_mask_off_by_one_fails_on_small_scores():
    """Keys past Nk arrive zero-filled: letting key Nk in (j > Nk) adds a key of score 0 and v 0. With ordinary
    scores (about sqrt(d)) it weighs nothing; the grading case of small scores catches it."""
    wrong = s04.source().replace("if (j >= Nk || (CAUSAL && j > i))", "if (j > Nk || (CAUSAL && j > i))")
    assert wrong != s04.source()
    small = dict(next(kw for name, kw in attention.cases(simulator=True) if name.startswith("small scores")))
    for kw, must_fail in ((dict(small, spread=1.0), False), (small, True)):
        args = attention.random_problem(**kw)
        p = attention.upload(*args)
        p.poison()
        with emulate.emulating():
            s04.launch(p, kernel=wrong)
        verdict = attention.judge(p.result(), *args)
        if must_fail:
            assert not verdict.ok, verdict.message
            assert "key Nk was let in" in verdict.message, verdict.message
        # (ordinary scores: the wrong kernel may pass; that is why the small-score case exists)


@pytest.mark.gpu
@pytest.mark.parametrize("params", PARAMS_04, ids=["defaults", "w1-bkv16-s3", "w2-bkv32-s2"])
def test_04_is_right_on_a_gpu(params):
    why = s04.unavailable()
    if why:
        pytest.skip(why)
    for name, kw in attention.cases(simulator=False):
        q, k, v, causal = attention.random_problem(**kw)
        verdict = attention.judge(attention.run("04_mma_cp_async", q, k, v, causal=causal, **params), q, k, v, causal)
        assert verdict.ok, (name, params, verdict.message)


# ------------------------------------------------------------------------------------ lab 04

def test_lab_04_solution_spliced_back_is_the_stage_source():
    spliced = labs.splice("04_mma_cp_async", _region(s04), track="attention")
    assert notebooks.strip_markers(s04.SOURCE.read_text()).split() == spliced.split()


def _grade_04(region, capsys, text_checks=True):
    """(passed, what the grader said): in this process where the emulator runs, else in a child process that asks
    for the simulator (CUDABOOK_SIMULATOR=1), so that the emulator grades it on a GPU machine too."""
    if SIMULATOR:
        saved = s04.LAB_TEXT_MISTAKES
        try:
            if not text_checks:
                s04.LAB_TEXT_MISTAKES = []
            ok = labs.grade("04_mma_cp_async", region, track="attention")
        finally:
            s04.LAB_TEXT_MISTAKES = saved
        return ok, capsys.readouterr().out
    code = ("import sys, cudabook; from cudabook import labs; from cudabook.attention import s04_mma_cp_async as s04\n"
            + ("" if text_checks else "s04.LAB_TEXT_MISTAKES = []\n")
            + "ok = labs.grade('04_mma_cp_async', sys.stdin.read(), track='attention'); raise SystemExit(0 if ok else 3)")
    done = subprocess.run([sys.executable, "-c", code], input=region, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "CUDABOOK_SIMULATOR": "1"}, cwd=pathlib.Path(__file__).parents[2])
    return done.returncode == 0, done.stdout + done.stderr[-2000:]


# The lab's planted mistakes (cudabook/attention/mistakes.py; tests/attention/test_attention_mistakes.py grades them):
# those the grader names from the text (LAB_TEXT_MISTAKES), before any run.
TEXT_04 = [m for m in MISTAKES if m.stage == "04_mma_cp_async" and "Not graded yet" in m.says]


def _edited(region, edits, what):
    for old, new in edits:
        assert old in region, f"the planted mistake '{what}' no longer applies to the lab region"
        region = region.replace(old, new, 1)
    return region


@pytest.mark.skipif(not HOST_CXX, reason="the emulator needs a host C++ compiler")
@pytest.mark.parametrize("what, edits", [(m.what, m.edits) for m in TEXT_04 if "barrier" not in m.what],
                         ids=[m.id for m in TEXT_04 if "barrier" not in m.what])
def test_lab_04_the_emulator_alone_catches_the_stage_and_commit_mistakes(what, edits, capsys):
    """Without the text checks, the run fails too (only the message is less precise). A missing barrier is the
    exception: the emulator switches threads at every warp operation, and the first read of a tile is an
    ldmatrix, so the other warps have usually run their own waits by then: the grader reads the text instead."""
    ok, out = _grade_04(_edited(_region(s04), edits, what), capsys, text_checks=False)
    assert not ok, (what, out)
    assert "FAIL" in out, out


@pytest.mark.skipif(SIMULATOR and not HOST_CXX, reason="no host C++ compiler for the emulator")
def test_lab_04_the_solution_region_passes(capsys):
    assert labs.grade("04_mma_cp_async", _region(s04), track="attention"), capsys.readouterr().out
    out = capsys.readouterr().out
    assert "PASS" in out and "bkv=16, stages=3" in out, out


# ------------------------------------------------------------------------------------ lab 05 (wgmma)

def test_lab_05_solution_spliced_back_is_the_stage_source():
    spliced = labs.splice("05_wgmma_tma", _region(s05), track="attention")
    assert notebooks.strip_markers(s05.SOURCE.read_text()).split() == spliced.split()


LAB_05 = [m for m in MISTAKES if m.stage == "05_wgmma_tma"]      # cudabook/attention/mistakes.py


def test_lab_05_every_planted_mistake_edits_the_region_and_compiles():
    region = _region(s05)
    for m in LAB_05:
        (old, new), = m.edits
        what = m.what
        assert old in region, f"the planted mistake '{what}' no longer applies to the lab region"
        source = labs.splice("05_wgmma_tma", region.replace(old, new), track="attention")
        assert s05.compile_cubin(arch="sm_90a", source_text=source)[:4] == b"\x7fELF", what


def test_lab_05_without_a_hopper_gpu_is_graded_in_the_emulator(capsys):
    if not attention.unavailable("05_wgmma_tma"):
        pytest.skip("this machine runs rung 05: the Hopper test grades it for real")
    if not SIMULATOR:
        pytest.skip("a GPU that cannot run rung 05 grades it in an emulator child (test_emulated_child.py)")
    assert labs.grade("05_wgmma_tma", _region(s05), track="attention")
    assert "run on the CPU by the emulator" in capsys.readouterr().out
    assert not labs.grade("05_wgmma_tma", _region(s05).replace("wgmma_fence();", "wgmma_fence()"),
                          track="attention")
    assert "does not compile" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.hopper
def test_lab_05_on_a_hopper_gpu_the_solution_passes(capsys):
    why = attention.unavailable("05_wgmma_tma")
    if why:
        pytest.skip(why)
    assert labs.grade("05_wgmma_tma", _region(s05), track="attention"), capsys.readouterr().out
    assert "PASS" in capsys.readouterr().out



HOPPER_PARAMS = {
    s05: ({}, {"bkv": 64}, {"bkv": 128, "warpgroups": 1, "stages": 3}, {"warpgroups": 3}),
    s06: ({}, {"bkv": 64}, {"pingpong": False}, {"overlap": False}, {"consumers": 1, "stages": 1},
          {"stages": 3, "bkv": 64}, {"persistent": False}, {"blocks": 3}, {"blocks": 2, "stages": 1},
          {"persistent": True, "schedule": "dynamic"}, {"persistent": True, "schedule": "dynamic", "blocks": 5},
          {"persistent": True, "head_group": 3}, {"persistent": True, "schedule": "dynamic", "head_group": 1}),
}


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("module", [s05, s06], ids=["05", "06"])
def test_the_hopper_rungs_are_right_on_a_hopper_gpu(module):
    why = module.unavailable()
    if why:
        pytest.skip(why)
    for name, kw in attention.cases(simulator=False):
        q, k, v, causal = attention.random_problem(**kw)
        for params in HOPPER_PARAMS[module]:
            got = attention.run(module.NAME, q, k, v, causal=causal, **params)
            verdict = attention.judge(got, q, k, v, causal)
            assert verdict.ok, (name, params, verdict.message)
