"""Sweeps recorded on a GPU (CUDABOOK_RECORD_SWEEPS, tools/record_sweeps.py) and drawn without one."""
import json
import pathlib
import subprocess
import sys
import types

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cudabook import lesson, results  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEDIGREE = {"commit": "abc1234", "dirty": False, "source_digest": "0123456789abcdef",
            "date": "2025-01-02T03:04:05+00:00", "machine": {"gpu": "NVIDIA H100 80GB HBM3",
                                                              "packages": {"numba": "0.61"}}}


def _entry(**over):
    e = {"track": "attention", "stage": "05_wgmma_tma", "param": "bkv", "values": [64, 128], "fixed": {},
         "size": None, "workload": "attention B=4 H=16 N=4096 d=128 causal=False", "plot_key": "pct_of_sdpa",
         "rows": [{"value": 64, "median_us": 1052.4, "TFLOPs": 522.39, "pct_of_sdpa": 76.5, "correct": True},
                  {"value": 128, "median_us": 987.6, "TFLOPs": 556.64, "pct_of_sdpa": 81.6, "correct": True}]}
    e.update(over)
    return e


@pytest.fixture
def figures(monkeypatch):
    """The figures plt.show() was asked to show."""
    shown = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(plt.gcf()))
    yield shown
    plt.close("all")


@pytest.fixture
def cannot_run(monkeypatch):
    """The attention stages cannot run here, as on a machine without Hopper (a GPU machine would sweep live)."""
    from cudabook import attention
    monkeypatch.setattr(attention, "unavailable", lambda stage: "this machine has no Hopper GPU")


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    (tmp_path / "sweeps").mkdir()
    return tmp_path


def test_save_sweep_writes_merges_and_replaces(tmp_path):
    path = tmp_path / "sub" / "H100_lessons.json"
    lesson.save_sweep(path, _entry(), pedigree=PEDIGREE)
    lesson.save_sweep(path, _entry(param="stages", values=[2, 3], rows=[
        {"value": 2, "median_us": 1000.0, "TFLOPs": 550.0, "pct_of_sdpa": 80.0, "correct": True}]),
        pedigree=dict(PEDIGREE, commit="def5678"))
    data = json.loads(path.read_text())
    assert [s["param"] for s in data["sweeps"]] == ["bkv", "stages"]
    assert data["gpu"] == "NVIDIA H100 80GB HBM3" and data["commit"] == "def5678"      # the latest write
    assert data["source_digest"] == PEDIGREE["source_digest"] and data["machine"]["packages"]["numba"] == "0.61"
    assert data["sweeps"][0]["commit"] == "abc1234"                                     # each keeps its own
    assert data["sweeps"][0]["rows"][0] == {"value": 64, "median_us": 1052.4, "TFLOPs": 522.39,
                                            "pct_of_sdpa": 76.5, "correct": True}
    # the same key again replaces that sweep in place; another `fixed` or `values` is another sweep
    lesson.save_sweep(path, _entry(rows=[{"value": 64, "median_us": 9.0, "pct_of_sdpa": 1.0, "correct": False}]),
                      pedigree=PEDIGREE)
    lesson.save_sweep(path, _entry(fixed={"stages": 3}), pedigree=PEDIGREE)
    lesson.save_sweep(path, _entry(values=(64,)), pedigree=PEDIGREE)
    data = json.loads(path.read_text())
    assert [(s["param"], s["values"], s["fixed"]) for s in data["sweeps"]] == [
        ("bkv", [64, 128], {}), ("stages", [2, 3], {}), ("bkv", [64, 128], {"stages": 3}), ("bkv", [64], {})]
    assert data["sweeps"][0]["rows"][0]["median_us"] == 9.0
    assert sorted(p.name for p in path.parent.iterdir()) == ["H100_lessons.json"]       # no temporary file left


def test_save_sweep_refuses_to_overwrite_a_broken_file(tmp_path):
    path = tmp_path / "x_lessons.json"
    path.write_text("{ not json")
    with pytest.raises(results.RecordError, match="not valid JSON"):
        lesson.save_sweep(path, _entry(), pedigree=PEDIGREE)
    assert path.read_text() == "{ not json"


def _fake_track():
    """A track whose 'GPU' branch runs on a CPU: no kernels, times from a table."""
    class Problem:
        def poison(self):
            self.out = None

        def result(self):
            return self.out

    def launch(problem, *, tile=8, mode="a"):
        if tile == 99:
            raise ValueError("too much shared memory\nmore")
        problem.out = last["tile"] = tile

    last = {}

    bench = types.SimpleNamespace(
        WORKLOADS=[{"n": 4}], COLUMNS=[("µs", "median_us", "{:,.1f}"), ("GB/s", "GBps", "{:,.0f}"),
                                       ("% of copy", "pct_of_copy", "{:.1f}")],
        PLOT_KEY="pct_of_copy", PLOT_LABEL="% of copy bandwidth",
        workload_name=lambda n: f"fake n={n}", prepare=lambda size: ((), Problem()),
        context=lambda problem, progress: {}, metrics=lambda problem, us, ctx: {"GBps": 1e4 / us,
                                                                               "pct_of_copy": 1e3 / us})
    module = types.SimpleNamespace(launch=launch, PARAMS={"tile": 8, "mode": "a", "depth": 2})
    track = types.SimpleNamespace(NAME="resample", bench=bench, stage=lambda name: module,
                                  unavailable=lambda name: None,
                                  judge=lambda got, *args: types.SimpleNamespace(ok=got != 16))
    return track, last


def test_a_timed_sweep_is_recorded_when_asked(tmp_path, monkeypatch, capsys, figures):
    path = tmp_path / "card_lessons.json"
    monkeypatch.setattr(lesson, "SIMULATOR", False)
    t, last = _fake_track()
    monkeypatch.setattr(results, "_timing", lambda fn, repeats: (fn(), 10.0 * last["tile"])[1])   # 80, 160 µs
    monkeypatch.setattr(results, "_pedigree", lambda: PEDIGREE)
    from cudabook import device
    monkeypatch.setattr(device, "gpu", lambda: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3"))
    monkeypatch.delenv(lesson.SWEEP_ENV, raising=False)
    rows = lesson.sweep("03_coalesced", "tile", [8, 16, 99], fixed={"mode": "b"}, track=t)
    assert not path.exists()                                       # recording is off unless asked
    assert [(v, ok) for v, _, _, ok in rows] == [(8, True), (16, False), (99, False)]
    assert rows[2][1] is None
    monkeypatch.setenv(lesson.SWEEP_ENV, str(path))
    lesson.sweep("03_coalesced", "tile", [8, 16, 99], fixed={"mode": "b"}, track=t)
    out = capsys.readouterr().out
    assert "Measured now on NVIDIA H100 80GB HBM3" in out and "ERROR ValueError: too much shared memory" in out
    assert "recorded in" in out and len(figures) == 2
    (entry,) = json.loads(path.read_text())["sweeps"]
    assert (entry["track"], entry["stage"], entry["param"], entry["values"], entry["fixed"], entry["size"]) == \
        ("resample", "03_coalesced", "tile", [8, 16, 99], {"mode": "b"}, None)
    assert entry["gpu"] == "NVIDIA H100 80GB HBM3" and entry["commit"] == "abc1234"
    assert entry["workload"] == "fake n=4" and entry["plot_key"] == "pct_of_copy"
    assert entry["defaults"] == {"tile": 8, "mode": "a", "depth": 2}      # the stage's settings when recorded
    first, wrong, failed = entry["rows"]
    assert first == {"value": 8, "median_us": 80.0, "GBps": 125.0, "pct_of_copy": 12.5, "correct": True}
    assert wrong["correct"] is False and failed == {"value": 99, "error": "ValueError: too much shared memory"}


def test_a_recorded_sweep_is_drawn_where_the_stage_cannot_run(results_dir, cannot_run, capsys, figures):
    lesson.save_sweep(results_dir / "sweeps" / "H100_80GB_HBM3_lessons.json", _entry(), pedigree=PEDIGREE)
    lesson.save_sweep(results_dir / "sweeps" / "H100_80GB_HBM3_lessons.json", _entry(param="stages"),
                      pedigree=PEDIGREE)
    h200 = dict(PEDIGREE, commit="fedcba9", machine={"gpu": "NVIDIA H200"})
    lesson.save_sweep(results_dir / "sweeps" / "H200_lessons.json",
                      _entry(rows=[{"value": 64, "median_us": 901.2, "TFLOPs": 610.0, "pct_of_sdpa": 88.8,
                                    "correct": True}]), pedigree=h200)
    (results_dir / "sweeps" / "H100_80GB_HBM3_attention.json").write_text('{"rows": []}')   # not a lessons file
    got = lesson.sweep("05_wgmma_tma", "bkv", [64, 128], track="attention")
    out = capsys.readouterr().out
    assert "Nothing to sweep on this machine" in out
    assert "Recorded on NVIDIA H100 80GB HBM3 at abc1234" in out and "Recorded on NVIDIA H200 at fedcba9" in out
    for number in ("1,052.4", "522.4", "76.5", "987.6", "81.6", "901.2", "88.8"):
        assert number in out
    assert "not measured on this machine" in out
    assert len(got) == 2 and "NVIDIA H200" in repr(got)
    (fig,) = figures
    ax = fig.axes[0]
    assert "recorded on NVIDIA H100 80GB HBM3 at abc1234" in ax.get_title()
    assert sorted(line.get_label() for line in ax.get_lines()) == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert sorted(list(line.get_ydata()) for line in ax.get_lines()) == [[76.5, 81.6], [88.8]]


def test_a_recorded_sweep_says_when_the_stages_other_defaults_changed_since(results_dir, capsys, figures):
    from cudabook.resample import s07_tma
    path = results_dir / "sweeps" / "H100_80GB_HBM3_lessons.json"
    then = {**{k: v for k, v in s07_tma.PARAMS.items() if k != "pdl"}, "box_rows": 99}
    lesson.save_sweep(path, _entry(track="resample", stage="07_tma", param="box_rows", values=[4, 8],
                                   defaults=then), pedigree=PEDIGREE)
    lesson.show_recorded_sweep("resample", "07_tma", "box_rows")
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "changed since" in x]
    assert "pdl not in the record (now True)" in line and "box_rows" not in line     # the swept one is not compared
    lesson.save_sweep(path, _entry(track="resample", stage="07_tma", param="box_rows", values=[4, 8],
                                   defaults=dict(s07_tma.PARAMS)), pedigree=PEDIGREE)
    lesson.show_recorded_sweep("resample", "07_tma", "box_rows")
    assert "changed since" not in capsys.readouterr().out
    # a fixed setting is the sweep's own choice, not a default that changed
    lesson.save_sweep(path, _entry(track="resample", stage="07_tma", param="box_rows", values=[4, 8],
                                   fixed={"consumer_warps": 99}, defaults=dict(s07_tma.PARAMS, consumer_warps=99)),
                      pedigree=PEDIGREE)
    lesson.show_recorded_sweep("resample", "07_tma", "box_rows", {"consumer_warps": 99})
    out = capsys.readouterr().out
    assert "Recorded on" in out and "changed since" not in out


def test_recorded_sweeps_match_on_fixed_but_not_on_values(results_dir):
    path = results_dir / "sweeps" / "H100_lessons.json"
    lesson.save_sweep(path, _entry(track="attention", stage="03_tiled", param="rows_per_warp", values=[1, 2, 4],
                                   fixed={"warps": 4}), pedigree=PEDIGREE)
    found = lesson.recorded_sweeps("attention", "03_tiled", "rows_per_warp", {"warps": 2})   # the simulator's
    assert [e["values"] for e in found] == [[1, 2, 4]]
    lesson.save_sweep(path, _entry(track="attention", stage="03_tiled", param="rows_per_warp", values=[1, 2],
                                   fixed={"warps": 2}), pedigree=PEDIGREE)
    assert [e["fixed"] for e in lesson.recorded_sweeps("attention", "03_tiled", "rows_per_warp",
                                                       {"warps": 2})] == [{"warps": 2}]          # the same first
    assert lesson.recorded_sweeps("attention", "03_tiled", "rows_per_warp", {}) == []
    assert lesson.recorded_sweeps("attention", "03_tiled", "warps", {"warps": 2}) == []


def test_without_a_record_the_message_says_how_to_record(results_dir, cannot_run, capsys, figures):
    assert lesson.sweep("05_wgmma_tma", "bkv", [64, 128], track="attention") is None
    out = capsys.readouterr().out
    assert "Nothing to sweep on this machine" in out
    assert "python tools/record_sweeps.py --track attention --only 05_wgmma_tma" in out
    assert not figures


def test_record_sweeps_lists_the_lessons_calls():
    done = subprocess.run([sys.executable, "tools/record_sweeps.py", "--list"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import record_sweeps
    finally:
        sys.path.remove(str(ROOT / "tools"))
    calls, skipped = record_sweeps.find_calls()
    assert len(calls) >= 40 and f"{len(calls)} sweep calls found" in done.stdout
    keys = {(c["track"], c["stage"], c["param"]) for c in calls}
    assert ("attention", "06_warp_specialized", "pingpong") in keys
    assert ("resample", "07_tma", "stages") in keys
    tiled = next(c for c in calls if c["stage"] == "02_smem_tiles" and c["track"] == "gemm")
    assert tiled["values"] == [8, 16, 32] and tiled["values_simulator"] == [8, 16]        # a GPU's values
    overlap = next(c for c in calls if c["param"] == "overlap")
    assert overlap["condition"] == "'overlap' in s06.PARAMS"
    assert "06_warp_specialized" in done.stdout and "pingpong" in done.stdout
    only = record_sweeps.select(calls, "attention", "05")
    assert {c["stage"] for c in only} == {"05_wgmma_tma"} and len(only) == 3


def test_record_sweeps_skips_what_it_cannot_read(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import record_sweeps
    finally:
        sys.path.remove(str(ROOT / "tools"))
    lesson_file = tmp_path / "lessons" / "x.py"
    lesson_file.parent.mkdir()
    lesson_file.write_text('lesson.sweep("01_naive", "threads", VALUES)\n'
                           'lesson.sweep("01_naive", "threads", [1, 2] if SIMULATOR else [4], track="gemm")\n'
                           'lesson.sweep("01_naive", "threads", __import__("os").getcwd())\n')
    record_sweeps.ROOT = tmp_path
    try:
        calls, skipped = record_sweeps.find_calls([lesson_file])
    finally:
        record_sweeps.ROOT = ROOT
    assert [(c["track"], c["values"], c["values_simulator"]) for c in calls] == [("gemm", [4], [1, 2])]
    assert [s["line"] for s in skipped] == [1, 3] and "VALUES" in skipped[0]["why"]


def test_every_sweep_a_lesson_invites_has_a_gpu_record():
    # a learner without a GPU sees each lesson.sweep(...) from results/sweeps/: none may be left unrecorded
    from cudabook import lesson
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import record_sweeps
    finally:
        sys.path.remove(str(ROOT / "tools"))
    calls, skipped = record_sweeps.find_calls()
    assert not skipped, skipped
    unrecorded = {(c["track"], c["stage"], c["param"]) for c in calls
                  if not lesson.recorded_sweeps(c["track"], c["stage"], c["param"], c["fixed"])}
    assert not unrecorded, ("record them on a GPU (python tools/record_sweeps.py --track T --only STAGE): "
                            f"{sorted(unrecorded)}")


def test_every_recorded_sweep_is_one_a_lesson_still_invites():
    # a sweep whose lesson call changed (other values, other fixed settings, another size) or went away would be
    # shown to a learner as if it were the lesson's: re-record it (tools/record_sweeps.py) and drop the old entry
    import json
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import record_sweeps
    finally:
        sys.path.remove(str(ROOT / "tools"))
    from cudabook import results

    def key(track, stage, param, values, fixed, size):
        return json.dumps([track, stage, param, results.json_plain(values), results.json_plain(fixed or {}),
                           results.json_plain(size)], sort_keys=True)

    calls, _ = record_sweeps.find_calls()
    invited = {key(c["track"], c["stage"], c["param"], c["values"], c["fixed"], c["size"]) for c in calls}
    stale = [(path.name, e["track"], e["stage"], e["param"], e["values"], e.get("fixed"), e.get("commit"))
             for path in sorted((ROOT / "results" / "sweeps").glob("*_lessons.json"))
             for e in json.loads(path.read_text())["sweeps"]
             if key(e["track"], e["stage"], e["param"], e["values"], e.get("fixed"), e.get("size")) not in invited]
    assert not stale, f"recorded sweeps no lesson invites any more: {stale}"


def test_on_a_gpu_a_sweep_shows_this_cards_recorded_values_and_measures_the_rest(results_dir, monkeypatch, capsys,
                                                                                 figures):
    # workshop pace: a value this card has recorded (same stage, param, fixed settings, size and defaults) is
    # shown from the record, marked ‡; a value it lacks is measured now; live=True measures them all
    monkeypatch.setattr(lesson, "SIMULATOR", False)
    monkeypatch.delenv(lesson.SWEEP_ENV, raising=False)
    monkeypatch.delenv(lesson.FULL_ENV, raising=False)
    t, last = _fake_track()
    timed = []
    monkeypatch.setattr(results, "_timing", lambda fn, repeats: (fn(), timed.append(last["tile"]),
                                                                 10.0 * last["tile"])[2])
    from cudabook import device
    monkeypatch.setattr(device, "gpu", lambda: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3"))
    rec = [{"value": 8, "median_us": 5.0, "GBps": 2000.0, "pct_of_copy": 200.0, "correct": True},
           {"value": 16, "error": "ValueError: out of registers"}]
    entry = dict(_entry(track="resample", stage="03_coalesced", param="tile", values=[8, 16, 32], rows=rec),
                 defaults={"tile": 8, "mode": "a", "depth": 2}, workload="fake n=4")
    lesson.save_sweep(results_dir / "sweeps" / "H100_80GB_HBM3_lessons.json", entry, pedigree=PEDIGREE)
    other_card = dict(PEDIGREE, machine={"gpu": "NVIDIA H200"})
    lesson.save_sweep(results_dir / "sweeps" / "H200_lessons.json",
                      dict(entry, rows=[dict(rec[0], value=32)]), pedigree=other_card)
    got = lesson.sweep("03_coalesced", "tile", [8, 16, 32], track=t)
    out = capsys.readouterr().out
    assert timed == [16, 32]                                    # 8 from the record; 16's error is measured again
    assert [(v, us) for v, us, _, _ in got] == [(8, 5.0), (16, 160.0), (32, 320.0)]
    assert "‡ recorded on this card at abc1234 (2025-01-02); 16, 32 measured now" in out
    assert "live=True" in out and "200.0  ✓  ‡" in out
    assert "‡ recorded at abc1234" in figures[-1].axes[0].get_title()
    timed.clear()
    lesson.sweep("03_coalesced", "tile", [8, 16, 32], track=t, live=True)
    assert timed == [8, 16, 32] and "Measured now on NVIDIA H100" in capsys.readouterr().out
    timed.clear()
    monkeypatch.setenv(lesson.FULL_ENV, "1")
    lesson.sweep("03_coalesced", "tile", [8, 16, 32], track=t)
    assert timed == [8, 16, 32]
    monkeypatch.delenv(lesson.FULL_ENV)
    # another fixed setting, or defaults that changed since, are not this sweep: all measured now
    timed.clear()
    lesson.sweep("03_coalesced", "tile", [8, 16, 32], fixed={"mode": "b"}, track=t)
    assert timed == [8, 16, 32]
    t.stage("03_coalesced").PARAMS["width"] = 4              # a setting the record did not have
    timed.clear()
    lesson.sweep("03_coalesced", "tile", [8, 16, 32], track=t)
    assert timed == [8, 16, 32]
