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
    assert timeline.per_call(rec) == 2
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
