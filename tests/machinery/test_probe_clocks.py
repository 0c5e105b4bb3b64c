"""tools/probe_clocks.py reads nvidia-smi's samples (it runs on a GPU; its parsing is checked here)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("probe_clocks", ROOT / "tools" / "probe_clocks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_sample_line_is_read_and_a_broken_one_is_skipped():
    tool = _tool()
    when, mhz, watts, celsius, reasons = tool._sample(
        "2026/11/28 10:06:45.047, 1575 MHz, 690.84 W, 61, 0x0000000000000004")
    assert (mhz, watts, celsius, reasons) == (1575.0, 690.84, 61.0, "0x0000000000000004") and when > 0
    assert tool._sample("[N/A], 1575 MHz, 690.84 W, 61, 0x4") is None
    assert tool._sample("timestamp, clocks.current.sm [MHz]") is None
    _, mhz, watts, _, reasons = tool._sample("2026/11/28 10:06:45.047, 1575 MHz, [N/A], , 0x4")
    assert (mhz, watts, reasons) == (1575.0, None, "0x4")             # one field missing: the others kept


def test_an_unknown_rung_is_refused_naming_the_rungs_before_any_gpu_work():
    import pytest
    with pytest.raises(SystemExit) as e:
        _tool().main(["--rung", "07_clutsers"])
    assert "no GEMM rung '07_clutsers'" in str(e.value) and "07_clusters" in str(e.value)


def test_a_rung_and_its_peer_are_read_from_the_clocks_reading(tmp_path, monkeypatch):
    """results.sustained_lines: the mean of the rung's runs against the mean of its peer's, a line a size."""
    import json
    from cudabook import results
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    (tmp_path / "readings").mkdir()
    run = lambda kernel, tf, mhz: {"size": 8192, "kernel": kernel, "seconds": 3.0, "TFLOPs": tf,   # noqa: E731
                                   "median_sm_MHz": mhz}
    record = {"gpu": "X", "commit": "abc", "runs": [run("cublaslt_fp8_fast", 1000, 1500), run("08_fp8", 1010, 1450),
                                                    run("08_fp8", 1030, 1460), run("cublaslt_fp8_fast", 1000, 1490)]}
    (tmp_path / "readings" / results.clocks_file("X", "cublaslt_fp8_fast")).write_text(json.dumps(record))
    assert results.sustained_lines("gemm", "07_clusters") == []           # cuBLAS's reading is another file
    (line,) = results.sustained_lines("gemm", "08_fp8")
    assert "8192³" in line and "08_fp8 1,020 TFLOP/s against cublaslt_fp8_fast 1,000, 1.020x" in line
    assert "SM clock 1,450/1,460 MHz against 1,490/1,500" in line
