"""cudabook.kit.stamps: a stage's STAMPS still find their lines in its kernel (a test fails on drift), the stamped
copy compiles for its GPU, and in the emulator it gives the same result with every warpgroup's events in order."""
import shutil

import numpy as np
import pytest

from cudabook import SIMULATOR, emulate
from cudabook import track as tracks
from cudabook import timeline
from cudabook.kit import stamps

KERNEL = """
extern "C" __global__ void k(float* out, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  float x = out[i];
  x = x * 2.f;
  out[i] = x;
}
"""
POINTS = (stamps.Point("load", r"float x = out", before=True), stamps.Point("math", r"x = x \* 2"))


def stamped_stages():
    return [(name, stage) for name in tracks.TRACKS for stage in tracks.get(name).STAGES
            if getattr(tracks.get(name).stage(stage), "STAMPS", None)]


def test_instrument_puts_each_stamp_at_its_line_and_stamps_start_and_end():
    text = stamps.instrument(KERNEL, "k", POINTS, 0x1000)
    body = text[text.index("__global__"):]
    lines = [line.strip() for line in body.splitlines()]
    assert lines.index("CUDABOOK_STAMP(1);") + 1 == lines.index("float x = out[i];")
    assert lines.index("x = x * 2.f;") + 1 == lines.index("CUDABOOK_STAMP(2);")
    assert "CUDABOOK_STAMP(0);" in lines and "CUDABOOK_STAMP(3);" in lines
    assert "if (i >= n) { CUDABOOK_STAMP(3); CUDABOOK_TIMER(63); CUDABOOK_COUNT(); return; }" in lines   # an early return ends too
    assert "0x1000ull" in text


def test_a_point_that_finds_no_line_is_named():
    with pytest.raises(ValueError, match="stamp 'gone'.*update the stage's STAMPS"):
        stamps.instrument(KERNEL, "k", (stamps.Point("gone", r"no_such_call\("),), 0x1000)
    with pytest.raises(ValueError, match="no __global__ function 'nope'"):
        stamps.instrument(KERNEL, "nope", POINTS, 0x1000)


def test_decode_reads_each_warpgroup_in_time_order_and_scales_cycles_by_the_timer():
    cap = 8
    buf = np.zeros(stamps.words(cap), np.uint64)

    def word(kind, value):
        return np.uint64((kind << stamps.KIND_SHIFT) | value)
    # warpgroup 1: the timer from 5,000 ns to 5,200 ns over 100 cycles: 2 ns a cycle
    for i, (kind, value) in enumerate([(62, 5000), (0, 1000), (1, 1040), (2, 1060), (3, 1100), (63, 5200)]):
        buf[1 * cap + i] = word(kind, value)
    buf[stamps.WARPGROUPS * cap + 1] = 6
    got = stamps.decode(buf, POINTS, capacity=cap)
    assert len(got) == 1 and got[0]["warpgroup"] == 1 and got[0]["ns_per_clock"] == 2.0
    assert got[0]["events"] == [("start", 0.0), ("load", 80.0), ("math", 120.0), ("end", 200.0)]
    shares = stamps.summary({"warpgroups": got})[1]
    assert shares == pytest.approx({"start": 0.4, "load": 0.2, "math": 0.4})


@pytest.mark.parametrize("track, stage", stamped_stages())
def test_each_stamped_stage_still_finds_its_points_and_compiles(track, stage):
    module = tracks.get(track).stage(stage)
    text = stamps.instrument(module.source(), module.KERNEL, module.STAMPS, 0x7F0000001000)
    assert text.count("CUDABOOK_STAMP(") >= len(module.STAMPS) + 2
    assert module.compile_cubin(source_text=text)[:4] == b"\x7fELF"


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler")
@pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")
@pytest.mark.parametrize("track, stage", [ts for ts in stamped_stages()
                                          if getattr(tracks.get(ts[0]).stage(ts[1]), "EMULATED", False)])
def test_a_stamped_stage_is_right_in_the_emulator_and_its_events_are_in_order(track, stage):
    t = tracks.get(track)
    module = t.stage(stage)
    name, inputs, _ = t.grading_cases(stage)[0]
    buf = np.zeros(stamps.words(), np.uint64)
    text = stamps.instrument(module.source(), module.KERNEL, module.STAMPS, buf.ctypes.data)
    p = t.upload(*inputs)
    p.poison()
    with emulate.emulating():
        module.launch(p, kernel=text)
    assert tracks.judge_of(t, stage)(p.result(), *inputs).ok, name
    got = stamps.decode(buf, module.STAMPS)
    assert got, "no warpgroup stamped"
    labels = {p.label for p in module.STAMPS}
    for wg in got:
        names = [e[0] for e in wg["events"]]
        assert names[0] == "start" and names[-1] == "end" and set(names[1:-1]) <= labels, names
        assert all(a[1] <= b[1] for a, b in zip(wg["events"], wg["events"][1:]))
    assert {"mma", "epilogue"} <= {e[0] for wg in got for e in wg["events"]}


def test_show_draws_the_newest_record_and_says_when_there_is_none(tmp_path, monkeypatch, capsys):
    import json

    from cudabook import results
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert timeline.show_stamps("gemm", "06_warp_specialized") is None
    assert "No stamps of gemm 06_warp_specialized" in capsys.readouterr().out
    (tmp_path / "readings").mkdir()
    events = [("start", 0.0), ("wait full", 100.0), ("mma", 300.0), ("epilogue", 900.0), ("end", 1000.0)]
    record = {"track": "gemm", "stage": "06_warp_specialized", "gpu": "GPU X", "commit": "abc", "date": "2026",
              "workload": "gemm M=N=K=4096", "block": 0, "plain_us": 10.0, "stamped_us": 10.5,
              "warpgroups": [{"warpgroup": 1, "events": events}]}
    (tmp_path / "readings" / "X_gemm_06_warp_specialized_stamps.json").write_text(json.dumps(record))
    assert timeline.show_stamps("gemm", "06_warp_specialized") is not None
    out = capsys.readouterr().out
    assert "10.0 µs a call without stamps, 10.5 µs with them" in out and "mma 60 %" in out
    assert "at least one warpgroup in the state mma: 60 % of the block's time" in out


def test_covered_counts_time_in_a_state_once_however_many_warpgroups_share_it():
    record = {"warpgroups": [{"events": [("start", 0.0), ("mma", 10.0), ("wait", 50.0), ("end", 100.0)]},
                             {"events": [("start", 0.0), ("mma", 30.0), ("wait", 70.0), ("mma", 80.0),
                                         ("end", 90.0)]}]}
    assert stamps.covered(record, "mma") == pytest.approx(0.7)     # 10-70 and 80-90 of 0-100


def test_a_twin_stamp_fires_just_before_its_point():
    """tools/probe_stamps.py --twice: a second Point with the same pattern, listed after the stage's points, is
    inserted before the point's own stamp, so the state between them (the twin's label) is one stamp's cost."""
    from cudabook.gemm import s05_wgmma_tma as s05
    issue = next(p for p in s05.STAMPS if p.label == "issue")
    points = tuple(s05.STAMPS) + (stamps.Point("a stamp", issue.pattern, issue.before, issue.nth),)
    text = stamps.instrument(s05.source(), s05.KERNEL, points, 0x7F0000001000)
    mine, twin = s05.STAMPS.index(issue) + 1, len(points)
    assert f"CUDABOOK_STAMP({twin});\n    CUDABOOK_STAMP({mine});" in text


def test_probe_stamps_refuses_a_wrong_command_line_before_touching_a_gpu():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "tools" / "probe_stamps.py"
    spec = importlib.util.spec_from_file_location("probe_stamps", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(SystemExit) as e:
        tool.main(["--track", "gemm", "--stage", "05", "--twice", "isue"])
    assert "--twice 'isue': no stamp of 05_wgmma_tma is labelled so" in str(e.value) and "issue" in str(e.value)
    with pytest.raises(SystemExit) as e:
        tool.main(["--track", "gemm", "--stage", "02", "--thread", "128"])
    message = str(e.value)
    assert "--thread 128: a thread of a warpgroup, 0-127" in message
    assert "--stage 02: no stage of gemm with STAMPS (05_wgmma_tma" in message
