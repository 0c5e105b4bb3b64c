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
