"""tools/sweep_params.py times its variants in interleaved rounds (it runs on a GPU; the order is checked here)."""
import importlib.util
import pathlib

import pytest

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


def test_a_ladder_sweep_times_the_peers_in_every_round_and_reads_each_variant_against_its_rounds_peers(monkeypatch):
    import types

    from cudabook import bench, results
    from cudabook import track as tracks
    spec = importlib.util.spec_from_file_location("sweep_params", ROOT / "tools" / "sweep_params.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    clock = iter(range(1, 1000))               # every timing 1 ms longer than the one before: a clock that drifts

    def peers(args, problem, ctx, *, repeats, progress):
        us = 1000.0 * next(clock)
        ctx["peer_us"] = us
        return {"peer": {"median_us": us, "correct": True}}

    def metrics(problem, median_us, ctx):
        return {"TFLOPs": 1.0, "pct_of_peer": round(100 * ctx["peer_us"] / median_us, 1)} if ctx.get("peer_us") \
            else {"TFLOPs": 1.0}
    bench_mod = types.SimpleNamespace(
        WORKLOADS=[{"n": 1}], workload_name=lambda n: f"toy n={n}", prepare=lambda size, rng: ((), types.SimpleNamespace(
            poison=lambda: None, result=lambda: None)), context=lambda problem: {}, peers=peers, metrics=metrics,
        summary=lambda ctx: f"peer {ctx.get('peer_us')} us", PLOT_KEY="pct_of_peer")
    stage = types.SimpleNamespace(launch=lambda problem, **params: None)
    toy = types.SimpleNamespace(bench=bench_mod, stage=lambda name: stage)
    monkeypatch.setattr(tracks, "get", lambda name: toy)
    monkeypatch.setattr(tracks, "judge_of", lambda t, s: lambda *a: types.SimpleNamespace(ok=True))
    monkeypatch.setattr(bench, "time_ms", lambda fn, **kw: float(next(clock)))
    monkeypatch.setattr(results, "_commit", lambda: "abc")
    monkeypatch.setattr(results, "source_digest", lambda: "d")
    written = []
    monkeypatch.setattr(tool, "_write", lambda record, name: written.append(record))
    monkeypatch.setattr(tool, "VARIANTS", {"toy": [("07", {}), ("07", {"x": 1})]})
    tool.ladder(types.SimpleNamespace(name="Toycard"), "toy")
    rows = {(r["stage"], str(r.get("params"))): r for r in written[0]["rows"]}
    a, b, peer = rows[("07", "{}")], rows[("07", "{'x': 1}")], rows[("peer", "None")]
    assert len(a["round_us"]) == len(b["round_us"]) == len(peer["round_us"]) == 6
    # round r: the peer, then the variants (forward, then back): each variant read against the peer of its round
    for r in range(6):
        assert peer["round_us"][r] < min(a["round_us"][r], b["round_us"][r])
    assert peer["median_us"] == sorted(peer["round_us"])[2] / 2 + sorted(peer["round_us"])[3] / 2
    for row in (a, b):                        # each figure against the peer: the median of the rounds' own
        per_round = sorted(100 * p / v for p, v in zip(peer["round_us"], row["round_us"]))
        assert row["pct_of_peer"] == pytest.approx((per_round[2] + per_round[3]) / 2, abs=0.06)
