"""Lessons at workshop pace (issue 28): on a GPU a lesson measures its rung and the rung before it, takes the rest
from this card's record (marked), says every step, keeps the float64 reference on disk, and sizes its peers from
the memory free. Tested here with the GPU's pieces stood in for: a fake track, a fake record of "this card", a
fake measure that notes what it was asked to time."""
import types

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cudabook import device, lesson, peers, refmemo, results  # noqa: E402

CARD = "NVIDIA Fakecard"
STAGES = ("01_a", "02_b", "03_c", "04_d")
WNAME = "fake n=4"
PEDIGREE = {"commit": "fed9876", "dirty": False, "source_digest": "0123456789abcdef",
            "date": "2026-11-28T10:00:00+00:00", "machine": {"gpu": CARD}}


def _row(us):
    return {"median_us": us, "pct_of_copy": round(1000.0 / us, 1), "correct": True}


def _record(gpu, commit, date, us):
    return {"gpu": gpu, "commit": commit, "date": date, "workloads": {WNAME: {
        "track": "fake", "size": {"n": 4}, "context": {"copy_GBps": 100.0},
        "stages": {s: _row(us * (4 - i)) for i, s in enumerate(STAGES)},
        "peers": {"torch_eager": _row(50.0), "torch_compile": _row(70.0)}}}}


THIS_CARD = _record(CARD, "abc1234", "2026-11-20T08:00:00+00:00", 100.0)
OTHER_CARD = _record("NVIDIA Othercard", "0000000", "2026-01-01T00:00:00+00:00", 7.0)


def _problem():
    """A problem in plain Python: launch() writes 1 into it, poison() clears it."""
    p = types.SimpleNamespace(out=None)
    p.poison, p.result = (lambda: setattr(p, "out", None)), (lambda: p.out)
    return p


def _fake_track(calls, *, peers_first=False, lesson_peers=None):
    class Bench:
        PEERS_FIRST = peers_first
        WORKLOADS = [dict(n=4)]
        COLUMNS = [("µs", "median_us", "{:,.1f}"), ("% of copy", "pct_of_copy", "{:.1f}")]
        REQUIRED = ("median_us", "pct_of_copy", "correct")
        PLOT_KEY, PLOT_LABEL = "pct_of_copy", "% of copy"

        @staticmethod
        def workload_name(n):
            return f"fake n={n}"

        @staticmethod
        def prepare(size, rng=None):
            calls.append(("prepare", rng is not None))
            return (rng.random(size["n"]),), _problem()

        @staticmethod
        def context(problem, progress=print):
            calls.append("context")
            return {"copy_GBps": 100.0}

        @staticmethod
        def summary(ctx):
            return "copy ceiling 100 GB/s"

        @staticmethod
        def metrics(problem, us, ctx):
            return {"pct_of_copy": round(1000.0 / us, 1)}

        @staticmethod
        def peers(args, problem, ctx, repeats=25, progress=print, only=None):
            calls.append(("peers", only))
            return {name: _row(60.0) for name in ("torch_eager", "torch_compile") if only is None or name in only}

        @staticmethod
        def consistency(row, workload, record):
            return None

    if lesson_peers:
        Bench.LESSON_PEERS = lesson_peers

    def launch(problem, **params):
        problem.out = 1

    stage = types.SimpleNamespace(launch=launch, PARAMS={})
    return types.SimpleNamespace(NAME="fake", bench=Bench, STAGES=STAGES, unavailable=lambda s: None,
                                 stage=lambda s: stage, judge=lambda got, *a: types.SimpleNamespace(ok=got == 1,
                                                                                                     message="ok"),
                                 grading_cases=lambda s: [])


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    """A machine with a GPU named CARD, whose results/ holds THIS_CARD's and OTHER_CARD's records; the figures
    shown are collected, not drawn."""
    monkeypatch.setattr(lesson, "SIMULATOR", False)
    monkeypatch.setattr(lesson, "_WORKLOAD", {})
    monkeypatch.setattr(device, "gpu", lambda: types.SimpleNamespace(name=CARD))
    monkeypatch.setattr(results, "load_all", lambda *a, **k: [OTHER_CARD, THIS_CARD])
    monkeypatch.setattr(results, "_pedigree", lambda: dict(PEDIGREE))
    monkeypatch.setenv("CUDABOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(lesson.FULL_ENV, raising=False)
    monkeypatch.delenv(refmemo.SEED_ENV, raising=False)
    shown = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(plt.gcf()))
    yield shown
    plt.close("all")


@pytest.fixture
def track(monkeypatch):
    calls = []
    t = _fake_track(calls)
    monkeypatch.setattr(results, "track_of", lambda wname, w=None: t)
    return t, calls


@pytest.fixture
def measured(monkeypatch):
    """A fake results.measure_workload: notes the stages (and peers) it is asked to time and says a line."""
    asked = []

    def measure(track, size, *, stages=None, peers=True, repeats=25, progress=print, prepared=None,
                peer_names=None, **kw):
        asked.append({"stages": list(stages), "peers": peers, "peer_names": peer_names, "progress": progress,
                      "sustained_stages": kw.get("sustained_stages")})
        progress(f"timing {', '.join(stages)}")
        rows = {s: _row(10.0 * (i + 1)) for i, s in enumerate(stages)}
        peer_rows = {n: _row(20.0) for n in (peer_names or ("torch_eager", "torch_compile"))} if peers else {}
        return {"track": "fake", "size": dict(size), "context": {"copy_GBps": 100.0}, "stages": rows,
                "peers": peer_rows, **PEDIGREE}
    monkeypatch.setattr(results, "measure_workload", measure)
    return asked


def test_a_lesson_measures_its_rung_and_the_one_before_and_shows_the_rest_as_recorded(gpu, track, measured, capsys):
    t, _ = track
    shown = lesson.ladder_so_far("03_c", track=t)
    assert [a["stages"] for a in measured] == [["02_b", "03_c"]]
    assert measured[0]["sustained_stages"] == ("03_c",)   # seconds back to back for this rung's pair alone
    stages = shown["workloads"][WNAME]["stages"]
    assert list(stages) == ["01_a", "02_b", "03_c"]
    assert stages["01_a"]["recorded"] == {"gpu": CARD, "commit": "abc1234", "date": "2026-11-20T08:00:00+00:00"}
    assert stages["01_a"]["median_us"] == 400.0                       # this card's, not the other card's (28.0)
    assert "recorded" not in stages["02_b"] and stages["03_c"]["median_us"] == 20.0
    out = capsys.readouterr().out
    assert "Measuring 02_b and 03_c now on NVIDIA Fakecard; the other rungs from this card's record (‡)" in out
    assert "| 01_a ‡ | 400.0 |" in out and "| 02_b | 10.0 |" in out
    assert "‡ not measured now: from the record of NVIDIA Fakecard at abc1234 (2026-11-20)" in out
    legend = [x.get_text() for x in gpu[-1].axes[0].get_legend().get_texts()]
    assert legend == ["measured now", "recorded: NVIDIA Fakecard at abc1234 (2026-11-20)"]
    bars = {p.get_x(): p.get_facecolor() for p in gpu[-1].axes[0].patches}
    assert len(set(bars.values())) == 2                               # recorded bars drawn apart from live ones


def test_the_first_rung_is_measured_alone(gpu, track, measured, capsys):
    t, _ = track
    shown = lesson.ladder_so_far("01_a", track=t)
    assert [a["stages"] for a in measured] == [["01_a"]]
    assert list(shown["workloads"][WNAME]["stages"]) == ["01_a"]
    out = capsys.readouterr().out
    assert "Measuring 01_a now on NVIDIA Fakecard:" in out and "‡" not in out      # nothing recorded to show


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_full_ladder_is_one_argument_or_one_variable_away(gpu, track, measured, monkeypatch, capsys, how):
    t, _ = track
    if how == "environment":
        monkeypatch.setenv(lesson.FULL_ENV, "1")
        shown = lesson.ladder_so_far("03_c", track=t)
    else:
        shown = lesson.ladder_so_far("03_c", track=t, full=True)
    assert [a["stages"] for a in measured] == [["01_a", "02_b", "03_c"]]
    assert measured[0]["sustained_stages"] is None                   # the whole ladder: every rung's pairs
    assert not any("recorded" in s for s in shown["workloads"][WNAME]["stages"].values())
    out = capsys.readouterr().out
    assert "Measuring the whole ladder to 03_c now" in out and "‡" not in out


def test_full_ladder_reads_the_variable():
    assert lesson.full_ladder(True) and not lesson.full_ladder(False)
    for value, full in (("1", True), ("yes", True), ("0", False), ("", False)):
        with pytest.MonkeyPatch.context() as m:
            m.setenv(lesson.FULL_ENV, value)
            assert lesson.full_ladder() is full
            assert lesson.full_ladder(False) is False                    # the argument wins


def test_without_a_record_of_this_card_it_says_so_and_measures_two_rungs(gpu, track, measured, monkeypatch, capsys):
    t, _ = track
    monkeypatch.setattr(results, "load_all", lambda *a, **k: [OTHER_CARD])
    shown = lesson.ladder_so_far("04_d", track=t)
    assert [a["stages"] for a in measured] == [["03_c", "04_d"]]
    out = capsys.readouterr().out
    assert "No record of fake n=4 on NVIDIA Fakecard in results/: measuring 03_c and 04_d only" in out
    assert "full=True" in out and "‡" not in out
    stages = shown["workloads"][WNAME]["stages"]
    assert stages["01_a"] == {"skipped": "not measured now, and not in a record of this card"}
    assert "7.0" not in out.split("No record")[1].split("|")[0]          # nothing of the other card's is shown


def test_peers_a_lesson_asks_for_are_measured_the_rest_recorded(gpu, monkeypatch, measured, capsys):
    calls = []
    t = _fake_track(calls, peers_first=True, lesson_peers=("torch_eager",))
    monkeypatch.setattr(results, "track_of", lambda wname, w=None: t)
    shown = lesson.ladder_so_far("02_b", track=t, peers=True)
    assert ("peers", ("torch_eager",)) in calls                       # the workload measures only the lesson's peer
    assert measured[-1]["peer_names"] == ("torch_eager",)
    peer_rows = shown["workloads"][WNAME]["peers"]
    assert "recorded" not in peer_rows["torch_eager"]
    assert peer_rows["torch_compile"]["recorded"]["commit"] == "abc1234"
    out = capsys.readouterr().out
    assert "Measuring 01_a and 02_b now on NVIDIA Fakecard; the other peers from this card's record (‡)" in out
    assert "| torch_compile ‡ |" in out
    lesson.ladder_so_far("02_b", track=t, peers=True, full=True)       # the whole ladder: every peer, measured now
    assert calls[-1] == ("peers", None) and measured[-1]["peer_names"] is None
    assert [a["stages"] for a in measured] == [["01_a", "02_b"], ["01_a", "02_b"]]


def test_without_peers_asked_none_are_measured_or_shown(gpu, track, measured):
    t, calls = track
    shown = lesson.ladder_so_far("02_b", track=t)
    assert measured[-1]["peers"] is False and shown["workloads"][WNAME]["peers"] == {}
    assert not [c for c in calls if c[0] == "peers"]


def test_every_step_is_said_as_it_starts(gpu, track, monkeypatch, capsys):
    """With the real measure_workload (its timing stood in for): the inputs, the yardstick and each rung are said
    before they are done, with the seconds so far; the inputs come from this machine's seed, recorded."""
    t, calls = track
    monkeypatch.setattr(results, "_timing", lambda fn, repeats: (fn(), 25.0)[1])
    monkeypatch.setenv(refmemo.SEED_ENV, "1234")
    shown = lesson.ladder_so_far("03_c", track=t)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("  [")]
    said = [line.split("] ", 1)[1] for line in lines]
    assert said[:2] == ["drawing the inputs of fake n=4 …", "measuring the yardstick …"]
    assert "02_b: launching, checking and timing (rung 1 of 2) …" in said
    assert "03_c: launching, checking and timing (rung 2 of 2) …" in said
    assert said.index("02_b: launching, checking and timing (rung 1 of 2) …") < next(
        i for i, s in enumerate(said) if s.startswith("02_b:") and "us" in s)
    assert all(line[3:9].strip().replace(".", "").isdigit() for line in lines)       # "  [   0.0 s] ..."
    assert calls[0] == ("prepare", True) and shown["workloads"][WNAME]["seed"] == 1234
    assert shown["workloads"][WNAME]["stages"]["03_c"]["correct"]


def test_the_fake_measure_hears_the_lessons_progress(gpu, track, measured, capsys):
    t, _ = track
    lesson.ladder_so_far("02_b", track=t)
    assert isinstance(measured[-1]["progress"], lesson.Progress)
    assert "] timing 01_a, 02_b" in capsys.readouterr().out


def test_in_the_simulator_the_recorded_ladder_is_shown(gpu, track, measured, monkeypatch, capsys):
    t, _ = track
    monkeypatch.setattr(lesson, "SIMULATOR", True)
    shown = lesson.ladder_so_far("03_c", track=t)
    assert measured == []
    assert [(r["gpu"], k) for r, k in shown] == [("NVIDIA Othercard", WNAME), (CARD, WNAME)]


# ------------------------------------------------------------------------------------ memory: sized, not probed
GiB = 2 ** 30


def test_the_budget_is_a_third_of_the_card_less_what_the_lesson_holds_and_never_more_than_is_free():
    assert peers.memory_budget(3 * GiB, free=78 * GiB, total=81 * GiB) == 24 * GiB
    assert peers.memory_budget(3 * GiB, free=10 * GiB, total=81 * GiB) == 10 * GiB - peers.MARGIN
    assert peers.memory_budget(30 * GiB, free=78 * GiB, total=81 * GiB) == 0


def test_a_batch_is_picked_from_the_free_memory():
    assert peers.at_once(48, GiB, 100 * GiB) == 48                     # everything fits
    assert peers.at_once(48, GiB, 13 * GiB) == 12                      # 4 calls of 12, not 3 of 13 and one of 9
    assert peers.at_once(48, GiB, 13 * GiB, fixed=3 * GiB) == 10       # room for 10: 5 calls, of 10 at most
    assert peers.at_once(48, GiB, GiB // 2) == 0                       # not even one


def _msda_args(N=48):
    from cudabook.msda import benchmark
    s = benchmark.WORKLOADS[0]
    L, S = len(s["levels"]), sum(h * w for h, w in s["levels"])
    shape = (N, s["Lq"], s["M"], L, s["P"])
    return (np.broadcast_to(np.uint16(0), (N, S, s["M"], s["D"])), np.array(s["levels"]), None,
            np.broadcast_to(np.float32(0), shape + (2,)), np.broadcast_to(np.float32(0), shape))


@pytest.mark.parametrize("free_gib, expected", [(78, 12), (20, 10), (6, 1), (3, 0)])
def test_msda_peers_take_as_many_images_as_the_free_memory_holds_and_never_probe(monkeypatch, free_gib, expected):
    """Deformable attention's torch peers at seed 002's size on an 80 GB card: 12 images a call when it is free,
    fewer when another notebook holds most of it, none (said, not tried) when one image does not fit."""
    import sys

    from cudabook.msda import benchmark
    compiled = []
    fake_torch = types.SimpleNamespace(compile=lambda fn, dynamic=False, mode=None: compiled.append(mode) or fn,
                                       cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(peers, "available", lambda: None)
    budget = peers.memory_budget
    monkeypatch.setattr(peers, "memory_budget",
                        lambda held=0: budget(held, free=free_gib * GiB, total=int(79.18 * GiB)))
    released, tried = [], []
    monkeypatch.setattr(peers, "release", lambda: released.append(1))
    monkeypatch.setattr(benchmark, "_measure_peer",
                        lambda fn, args, repeats, at_once: tried.append(at_once) or {"median_us": 1e5, "correct": True})
    problem = types.SimpleNamespace(min_bytes=3031695408)
    said = []
    rows = benchmark.peers(_msda_args(), problem, {"copy_GBps": 3000.0}, progress=said.append,
                           only=("torch_eager",))
    assert list(rows) == ["torch_eager"]
    if expected:
        assert tried == [expected] and rows["torch_eager"]["median_us"] == 1e5 and released == [1]
        assert said[0].startswith(f"torch_eager: {expected} of 48 images a call")
    else:
        assert tried == [] and rows["torch_eager"]["skipped"].startswith("not run: one image a call needs")
    all_rows = benchmark.peers(_msda_args(), problem, {"copy_GBps": 3000.0}, progress=said.append)
    assert list(all_rows) == ["torch_eager", "torch_compile", "torch_compile_max_autotune"]
    if expected:                                                   # the default mode, then the strongest
        assert compiled == [None, "max-autotune-no-cudagraphs"]

def test_msda_peer_memory_counts_the_samples_torch_stacks():
    """One image's grid_sample samples at seed 002's size: M D Lq L P float32, 0.47 GiB (the record's
    out-of-memory message asked for 22.59 GiB at 48 images); three such tensors live at once."""
    from cudabook.msda import benchmark
    held, per_image = benchmark.peer_bytes(_msda_args())
    samples = 8 * 32 * 15420 * 4 * 8 * 4
    assert round(48 * samples / GiB, 2) == 22.59
    assert 3 * samples < per_image < 3.3 * samples
    assert held == 48 * (15420 * 8 * 32 * 4 + 15420 * 8 * 4 * 8 * 3 * 4)


# ------------------------------------------------------------------------------------ the reference, on disk
def test_a_reference_of_seeded_inputs_is_made_once_per_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDABOOK_CACHE", str(tmp_path))
    monkeypatch.delenv("CUDABOOK_NO_DISK_CACHE", raising=False)
    made = []

    def make(x, y):
        made.append(1)
        return x.astype(np.float64) @ y, np.abs(x).sum() * np.ones(3)

    rng = np.random.default_rng(7)
    inputs = (rng.random((3, 4)), rng.random((4, 3)), True)
    refmemo.drawn(inputs, {"track": "fake", "workload": WNAME, "size": {"n": 4}, "seed": 7})
    first = refmemo.References(name="test")
    said = []
    with refmemo.reporting(said.append):
        ref, bound = first.get(inputs, lambda: make(*inputs[:2]))
    assert made == [1] and len(list((tmp_path / "references").glob("*.npz"))) == 1
    assert any(line.startswith("float64 reference: kept in") for line in said)
    again = refmemo.References(name="test")                           # another notebook: a new process's memo
    with refmemo.reporting(said.append):
        ref2, bound2 = again.get(inputs, lambda: make(*inputs[:2]))
    assert made == [1] and np.array_equal(ref, ref2) and np.array_equal(bound, bound2)
    assert said[-1].startswith("float64 reference: read back from")
    inputs[0][0, 0] += 1                                              # other numbers under the same key
    third = refmemo.References(name="test")
    third.get(inputs, lambda: make(*inputs[:2]))
    assert made == [1, 1]


def test_inputs_not_drawn_from_a_seed_never_go_to_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDABOOK_CACHE", str(tmp_path))
    memo = refmemo.References(name="test")
    x = np.ones(5)
    assert memo.get((x,), lambda: x * 2)[0] == 2.0
    assert memo.path((x,)) is None and not (tmp_path / "references").exists()
    refmemo.drawn((x,), {"seed": 1})
    monkeypatch.setenv("CUDABOOK_NO_DISK_CACHE", "1")
    refmemo.References(name="test").get((x,), lambda: x * 2)
    assert not (tmp_path / "references").exists()


def test_the_machine_seed_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDABOOK_CACHE", str(tmp_path))
    monkeypatch.delenv(refmemo.SEED_ENV, raising=False)
    seed = refmemo.machine_seed()
    assert refmemo.machine_seed() == seed and (tmp_path / "references" / "seed").read_text().strip() == str(seed)
    monkeypatch.setenv(refmemo.SEED_ENV, "42")
    assert refmemo.machine_seed() == 42


def test_a_quiet_step_is_said_again_with_its_seconds_so_far():
    """The heartbeat: a step that says nothing for `every` seconds is said again (with how long it has taken),
    once per `every`, and a step that speaks resets it."""
    said = []
    say = lesson.Progress(out=said.append, every=5.0)
    t0 = say.t0
    say.beat(t0 + 9)                                    # nothing said yet: nothing to repeat
    say("torch_compile: compiling, then timing …")
    start = say.step_t
    say.beat(start + 4.9)
    assert len(said) == 1
    say.beat(start + 5.0)
    say.beat(start + 7.0)                               # said 2 s ago: quiet again only at +10
    say.beat(start + 10.0)
    assert [s.split("] ", 1)[1] for s in said[1:]] == [
        "… still: torch_compile: compiling, then timing (5 s so far)",
        "… still: torch_compile: compiling, then timing (10 s so far)"]
    say("torch_compile: 90.1 us")                       # a new step: its own clock
    say.beat(say.step_t + 3)
    assert len(said) == 4


def test_the_heartbeat_thread_speaks_while_the_block_runs_and_stops_after():
    import time
    said = []
    say = lesson.Progress(out=said.append, every=0.3)
    with say.heartbeat():
        say("a long step …")
        time.sleep(1.6)                                 # quiet from 0.3 s on, polled every 0.25 s
    n = len(said)
    assert n >= 3 and all("… still: a long step" in s for s in said[1:])
    time.sleep(0.6)
    assert len(said) == n                               # the thread ended with the block


def test_a_noted_step_is_said_only_if_it_lasts():
    said = []
    say = lesson.Progress(out=said.append, every=5.0)
    say.note("grading: case 1, random")
    say.beat(say.t0 + 4.0)
    assert said == []
    say.note("grading: case 2, odd D")
    start = say.step_t
    say.beat(max(start, say.t0 + 5.0) + 1.0)
    assert len(said) == 1 and "… still: grading: case 2, odd D (" in said[0]


def test_a_watched_block_speaks_only_if_it_lasts_and_never_inside_another_heartbeat_or_quiet(capsys):
    import time

    from cudabook import progress
    with progress.watched("compiling", every=0.3):
        time.sleep(0.9)
    out = capsys.readouterr().out
    assert "… still: compiling" in out
    with progress.watched("quick", every=5.0):
        pass
    assert capsys.readouterr().out == ""
    said = []
    outer = lesson.Progress(out=said.append, every=60.0)
    with outer.heartbeat(), progress.watched("inner", every=0.3):
        time.sleep(0.9)
    with progress.quiet(), progress.watched("in a child", every=0.3):
        time.sleep(0.9)
    assert said == [] and capsys.readouterr().out == ""


def test_after_a_result_line_the_heartbeat_says_it_is_still_working_not_that_the_result_still_runs():
    said = []
    say = lesson.Progress(out=said.append, every=5.0)
    say("reference gather: 14,198 GB/s")
    say.beat(say.step_t + 6.0)
    assert said[-1].split("] ", 1)[1] == "… still working, 6 s after: reference gather: 14,198 GB/s"


def test_a_quiet_grade_keeps_every_check_inside_it_quiet(monkeypatch, capsys):
    """grade(..., quiet=True) prints nothing, not even a lasting launch's heartbeat (progress.watched)."""
    import time

    from cudabook import labs, progress
    seen = []

    def fake_grade(*a):
        with progress.watched("launching and checking", every=0.2):
            seen.append(list(progress._BEATING))
            time.sleep(0.6)
        return True
    monkeypatch.setattr(labs, "_grade", fake_grade)
    assert labs.grade("01_naive", object(), track="resample", quiet=True)
    assert seen == [[None]] and capsys.readouterr().out == ""
    assert progress._BEATING == []


def test_a_step_noted_a_moment_ago_is_said_without_zero_seconds_so_far():
    said = []
    say = lesson.Progress(out=said.append, every=5.0)
    say.note("grading: case 3, odd D")
    say.step_t = say.t0 + 4.9                           # noted just before the quiet reached 5 s
    say.beat(say.t0 + 5.0)
    assert [s.split("] ", 1)[1] for s in said] == ["… still: grading: case 3, odd D"]
