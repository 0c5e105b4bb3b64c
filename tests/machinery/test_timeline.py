"""cudabook.timeline: recorded kernel timelines read back, cut into calls, gaps and periods counted, drawn."""
import json

import matplotlib

matplotlib.use("Agg")

from cudabook import results, timeline  # noqa: E402


def _record(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    kernels = []
    for c in range(3):                       # two kernels a call: a short one, then a long one starting early
        t = 100.0 * c
        kernels += [{"name": "pre", "start_us": t, "end_us": t + 5.0},
                    {"name": "main", "start_us": t + 1.0, "end_us": t + 99.5}]
    rec = {"kind": "kernel timeline", "gpu": "NVIDIA Testcard", "track": "resample", "stage": "07_tma",
           "workload": "w", "calls": 3, "commit": "abc1234", "date": "2026-11-28T10:00:00",
           "runs": [{"settings": {"pdl": True}, "kernels": kernels}]}
    (tmp_path / "readings").mkdir()
    (tmp_path / "readings" / "Testcard_resample_07_tma_timeline.json").write_text(json.dumps(rec))
    return rec


def test_the_first_call_is_left_out_and_each_gap_and_period_counted(tmp_path, monkeypatch):
    rec = _record(tmp_path, monkeypatch)
    run = rec["runs"][0]
    assert timeline.per_call(rec, run) == 2
    assert [c[0]["start_us"] for c in timeline.calls(run, 2)] == [100.0, 200.0]
    gaps, periods = timeline.steps(run, 2)
    assert [g["gap_us"] for g in gaps] == [-4.0, 0.5, -4.0] and periods == [100.0]


def test_show_draws_each_record_and_says_where_none_is(tmp_path, monkeypatch, capsys):
    _record(tmp_path, monkeypatch)
    assert len(timeline.show("resample", "07_tma")) == 1
    out = capsys.readouterr().out
    assert "NVIDIA Testcard" in out and "pdl=True: a call every 100.0 µs" in out and "pre → main -4.00" in out
    assert timeline.show("resample", "08_fused_gather") == []
    assert "python tools/probe_timeline.py --track resample --stage 08_fused_gather" in capsys.readouterr().out


def test_runs_with_other_kernels_or_a_lost_kernel_are_drawn_or_said(tmp_path, monkeypatch, capsys):
    rec = _record(tmp_path, monkeypatch)
    one = [{"name": "fused", "start_us": 100.0 * c, "end_us": 100.0 * c + 90.0} for c in range(3)]
    rec["runs"].append({"settings": {"pdl": False}, "kernels": one})              # a kernel run 0 does not have
    rec["runs"].append({"settings": {"x": 1}, "kernels": one[:2] + rec["runs"][0]["kernels"][:3]})   # 5 for 3 calls
    path = tmp_path / "readings" / "Testcard_resample_07_tma_timeline.json"
    path.write_text(json.dumps(rec))
    assert timeline.per_call(rec, rec["runs"][1]) == 1 and timeline.per_call(rec, rec["runs"][2]) is None
    assert timeline.steps(rec["runs"][1], 1)[1] == [100.0]                         # its own period, not run 0's
    timeline.show("resample", "07")                                                # (the stage by its number)
    out = capsys.readouterr().out
    assert "pdl=False: a call every 100.0 µs" in out and "x=1: 5 kernels for 3 calls do not share out" in out
