"""tools/probe_peer_kernels.py runs on a GPU; here: it refuses with the reason where it cannot run, and the
probes' readings land where results.readings finds them."""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools import probe_peer_kernels  # noqa: E402

from cudabook import results  # noqa: E402


def test_a_track_with_no_peer_set_against_a_rung_is_refused_by_name(capsys):
    assert probe_peer_kernels.main(["--track", "msda"]) == 1
    assert "names no HEAD_TO_HEAD peers" in capsys.readouterr().out


def test_a_reading_is_written_where_readings_finds_it(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    record = {"gpu": "NVIDIA Test Card", "track": "gemm", "stage": "07_clusters", "date": "2026-01-01", "x": 1}
    path = results.write_reading(record, "settings_vs_peer")
    assert path == tmp_path / "readings" / "Test_Card_gemm_07_clusters_settings_vs_peer.json"
    assert json.loads(path.read_text()) == record
    assert results.readings("gemm", "07_clusters", "settings_vs_peer") == [record]


def test_show_peer_kernels_prints_each_kernel_and_says_when_there_is_none():
    lines = []
    assert results.show_peer_kernels("gemm", "07_clusters", out=lines.append) >= 1
    assert any("cublas" in line for line in lines) and any(" µs x " in line for line in lines)
    lines.clear()
    assert results.show_peer_kernels("gemm", "01_naive", out=lines.append) == 0
    assert "tools/probe_peer_kernels.py" in lines[0]
