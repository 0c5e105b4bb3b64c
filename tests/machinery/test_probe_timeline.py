"""tools/probe_timeline.py reads the kernels out of torch.profiler's chrome trace (it runs on a GPU; the reading
is checked here)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_only_kernels_are_read_in_start_order():
    spec = importlib.util.spec_from_file_location("probe_timeline", ROOT / "tools" / "probe_timeline.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "main", "ts": 110.5, "dur": 90.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cuLaunchKernelEx", "ts": 100.0, "dur": 3.0},
        {"ph": "X", "cat": "kernel", "name": "prepass", "ts": 100.25, "dur": 5.5},
        {"ph": "i", "cat": "kernel", "name": "marker", "ts": 99.0}]}
    assert tool.kernel_spans(trace) == [{"name": "prepass", "start_us": 100.25, "end_us": 105.75},
                                        {"name": "main", "start_us": 110.5, "end_us": 200.5}]
