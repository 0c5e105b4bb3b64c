"""The resampling benchmark's truer ceiling: the bytes a resampler cannot avoid (only the source rows some output
uses), and the record check of % of needed."""
import numpy as np

from cudabook.resample import benchmark, inputs


def _brute(src_times, src_feats, tgt_times):
    """Rows that move an output: for each target, the two rows np.interp mixes, each only if its weight is > 0."""
    B, S, D = src_feats.shape
    T = tgt_times.shape[1]
    rows = 0
    for b in range(B):
        used = set()
        t = src_times[b].astype(np.float64)
        for x in tgt_times[b].astype(np.float64):
            hi = min(max(int(np.searchsorted(t, x, side="right")), 1), S - 1)
            w = min(max((x - t[hi - 1]) / (t[hi] - t[hi - 1]), 0.0), 1.0)
            if w < 1.0:
                used.add(hi - 1)
            if w > 0.0:
                used.add(hi)
        rows += len(used)
    return 4 * B * S + 4 * B * T + 2 * D * rows + 2 * B * T * D


def test_needed_bytes_count_only_the_rows_an_output_uses(rng):
    for sorted_targets in (True, False):
        args = inputs.random_problem(3, 50, 20, 7, sorted_targets=sorted_targets, rng=rng)
        assert inputs.needed_bytes(*args) == _brute(*args)
    times, feats, targets = inputs.random_problem(2, 50, 200, 3, rng=rng)
    full = 4 * 2 * 50 + 4 * 2 * 200 + 2 * 3 * 2 * 50 + 2 * 2 * 200 * 3
    assert inputs.needed_bytes(times, feats, targets) <= full
    targets = np.repeat(times[:, 10:11], 200, axis=1)      # every target on one source time: one row a batch
    assert inputs.needed_bytes(times, feats, targets) == 4 * 2 * 50 + 4 * 2 * 200 + 2 * 3 * 2 + 2 * 2 * 200 * 3


def test_a_wrong_pct_of_needed_is_caught():
    workload = {"context": {"min_bytes": 1_000_000, "copy_GBps": 100.0, "needed_bytes": 800_000,
                            "needed_ceiling_us": 8.0}}
    good = {"median_us": 10.0, "GBps": 100.0, "pct_of_copy": 100.0, "pct_of_needed": 80.0}
    assert benchmark.consistency(good, workload, {}) is None
    assert "pct_of_needed 90.0 but the needed bytes take 8.0 µs" in \
        benchmark.consistency(dict(good, pct_of_needed=90.0), workload, {})
    assert "records no needed_ceiling_us" in benchmark.consistency(good, {"context": {"min_bytes": 1_000_000}}, {})
