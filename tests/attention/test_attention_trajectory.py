"""The seeds' trajectories plot: built from the committed H100 record, the measured line carries the record's
numbers, both seeds get their bands, the SDPA line is the fastest correct backend, a record missing a rung still
plots, and every prediction points at a rung the track has.
"""
import copy

import pytest

from cudabook import attention, results
from cudabook.attention import trajectory


@pytest.fixture(scope="module")
def record():
    found = [r for r in results.load_all()
             if r["gpu"] == "NVIDIA H100 80GB HBM3" and any(k.startswith("attention") for k in r["workloads"])]
    assert found, "results/H100_80GB_HBM3.json with attention workloads"
    return found[0]


def _gid(fig, gid):
    ax = fig.axes[0]
    return [a for a in list(ax.lines) + list(ax.patches) + list(ax.collections) if a.get_gid() == gid]


def _measured_line(fig):
    (line,) = _gid(fig, "measured")
    return list(line.get_xdata()), list(line.get_ydata())


@pytest.mark.parametrize("d, causal", [(128, False), (64, True)])
def test_measured_line_is_the_records_numbers(record, d, causal):
    name = attention.bench.workload_name(B=4, H=16, N=4096, d=d, causal=causal)
    stages = record["workloads"][name]["stages"]
    want = [(r, stages[r]["TFLOPs"]) for r in attention.STAGES
            if r in stages and "TFLOPs" in stages[r] and stages[r]["correct"]]
    assert want and trajectory.measured(record, d, causal) == want
    fig = trajectory.figure(record, d, causal)
    xs, ys = _measured_line(fig)
    assert xs == [list(attention.STAGES).index(r) for r, _ in want] and ys == [v for _, v in want]
    assert record["gpu"] in fig.axes[0].get_title() and name in fig.axes[0].get_title()
    assert fig.axes[0].get_yscale() == "log"


def test_both_seeds_have_bands(record):
    fig = trajectory.figure(record)
    for seed in ("001", "003"):
        predicted = [p for p in trajectory.PREDICTIONS if p["seed"] == seed and p["status"] == "predicted"]
        assert predicted
        for p in predicted:
            (bar,) = _gid(fig, f"seed {seed} {p['step']}")
            lo, hi = p["tflops"]
            assert bar.get_y() == pytest.approx(lo) and bar.get_y() + bar.get_height() == pytest.approx(hi)
        assert _gid(fig, f"seed {seed} trajectory")
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any(lab.startswith("001") for lab in labels) and any(lab.startswith("003") for lab in labels)


def test_sdpa_line_is_the_fastest_correct_backend(record):
    w = record["workloads"][attention.bench.workload_name(B=4, H=16, N=4096, d=128, causal=False)]
    best = max(v["TFLOPs"] for k, v in w["peers"].items()
               if k.startswith("sdpa_") and "TFLOPs" in v and v["correct"])
    assert trajectory.sdpa_best(record)[1] == best
    (line,) = _gid(trajectory.figure(record), "sdpa")
    assert list(line.get_ydata()) == [best, best]


def test_a_record_missing_rungs_still_plots(record):
    partial = copy.deepcopy(record)
    name = attention.bench.workload_name(B=4, H=16, N=4096, d=128, causal=False)
    stages = partial["workloads"][name]["stages"]
    stages.pop("05_wgmma_tma")
    stages.pop("06_warp_specialized", None)
    stages["02_online_softmax"] = {"skipped": "not on this machine"}
    stages["03_tiled"]["correct"] = False
    got = [r for r, _ in trajectory.measured(partial)]
    assert got == ["01_naive", "04_mma_cp_async"]
    xs, _ = _measured_line(trajectory.figure(partial))
    assert xs == [0, 3]
    rows = trajectory.table(partial)
    assert [r["rung"] for r in rows] == list(attention.STAGES)
    assert rows[4]["measured"] is None and "45–55" in rows[4]["003"]


def test_table(record):
    rows = trajectory.table(record)
    assert rows[0] == {"rung": "01_naive", "measured": 0.63, "001": "", "003": ""}
    by = {r["rung"]: r for r in rows}
    assert "10–20" in by["04_mma_cp_async"]["001"] and "30–40" in by["04_mma_cp_async"]["003"]
    assert "claimed" in by["03_tiled"]["001"] and "10–15" in by["03_tiled"]["003"]


def test_predictions_name_real_rungs_and_short_quotes():
    assert {p["seed"] for p in trajectory.PREDICTIONS} == {"001", "003"}
    for p in trajectory.PREDICTIONS:
        assert p["rung"] in attention._LADDER.modules, p
        assert p["status"] in ("claimed", "predicted")
        assert p["tflops"] or (p["speedup"] and p["over"])
        assert len(p["quote"].split()) <= 15, p["quote"]
        if p["over"]:
            assert any(q["seed"] == p["seed"] and q["step"] == p["over"] for q in trajectory.PREDICTIONS)


def test_speedups_without_a_base_figure_anchor_on_our_measurement(record):
    plan = (dict(seed="001", step="base", rung="01_naive", status="claimed", tflops=None, speedup=None, over=None,
                 d=None, quote=""),
            dict(seed="001", step="next", rung="03_tiled", status="predicted", tflops=None, speedup=(2.0, 3.0),
                 over="base", d=None, quote=""),
            dict(seed="001", step="after", rung="04_mma_cp_async", status="predicted", tflops=None,
                 speedup=(10.0, 10.0), over="next", d=None, quote=""))
    ours = dict(trajectory.measured(record))["01_naive"]
    (lo, hi), how = trajectory.predicted(plan[1], record, predictions=plan)
    assert (lo, hi) == (pytest.approx(2 * ours), pytest.approx(3 * ours)) and how == "x-factor on our measured 01_naive"
    (lo, hi), how = trajectory.predicted(plan[2], record, predictions=plan)
    assert (lo, hi) == (pytest.approx(20 * ours), pytest.approx(30 * ours)) and "our measured 01_naive" in how
    assert "anchored on our measured 01" in trajectory.seed_label("001", record, predictions=plan)
    assert trajectory.predicted(plan[1], None, predictions=plan) is None
    fig = trajectory.figure(record, predictions=plan)
    (bar,) = _gid(fig, "seed 001 next")
    assert bar.get_y() == pytest.approx(2 * ours)
    # the real seeds state TFLOP/s at every step: nothing of theirs is anchored on our numbers
    assert all(trajectory.predicted(p, record)[1] == "stated" for p in trajectory.PREDICTIONS)
    assert trajectory.seed_label("001", record) == "001 async double-buffer plan"
    assert "d=64" in trajectory.seed_label("003", record)
