"""tools/sweep_params.py times its variants in interleaved rounds (it runs on a GPU; the order is checked here)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_round_times_every_variant_alternately_forward_and_back():
    spec = importlib.util.spec_from_file_location("sweep_params", ROOT / "tools" / "sweep_params.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    order = []
    clock = iter(range(100))                  # a clock that drifts: each timing longer than the one before

    def time_ms(name):
        order.append(name)
        return next(clock)
    runs = [("a", {}, True, "a"), ("b", {"x": 1}, True, "b"), ("c", {"x": 2}, True, "c")]
    rows = list(tool._interleaved(runs, time_ms, rounds=4))
    assert order == list("abc" "cba" "abc" "cba")
    assert [r[:3] for r in rows] == [r[:3] for r in runs]
    medians = [sorted(r[3])[1:3] for r in rows]     # each variant's middle rounds: the drift is shared out
    assert [sum(m) / 2 for m in medians] == [5.5, 5.5, 5.5]
