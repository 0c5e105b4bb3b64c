"""A track's fast rungs, their parameters swept on this GPU at the benchmark's size: each variant checked against
the float64 reference, timed with CUDA events (back-to-back launches, median). Writes results/sweeps/.

    python tools/sweep_params.py --track attention [--d 128 64]
    python tools/sweep_params.py --track msda [--locations local]
    python tools/sweep_params.py --track gemm
    python tools/sweep_params.py --list                 the variants of each track (any machine)

The variants are each track's bench.SWEEP_VARIANTS (--list prints them).
attention: rung 05 at its defaults; rung 06 at its defaults and with bkv=64, pingpong off, overlap off,
consumers 1, 2 or 3, stages 2, 3 or 4 (B=4 H=16 N=4096, d = 128 and 64, causal and not), each judged by
attention.judge (a sample of heads and rows), beside the SDPA backends (flash, cuDNN, efficient) of the same run;
a variant that does not fit is printed as not run and left out. Writes results/sweeps/<gpu>_attention.json; the
records (H100 at 5ce4fba, H200 at 1ded3a8) have every variant at d = 64 and all but consumers=3 and stages=4
(which do not fit) at d = 128.
msda: rung 02 at its defaults and with 8-byte vectors; rung 04 at its defaults and with the strided item order;
rung 05 at 128, 256 and 512 threads, at 256 threads with branches (branchless off), and with 2 or 4 vectors a lane
at each block size; on the benchmark's `local` (or
`uniform`) workload, with each variant's largest error on image 0 (recorded, not judged). Writes
results/sweeps/<gpu>_msda_<locations>.json; the one such record (H100, `local`, at 5b13e05) predates the vectors
variants and holds the first six only: no recorded sweep has 2 or 4 vectors a lane.
gemm: rungs 07 (bf16) and 08 (FP8) at their defaults and with one lever moved (3 stages, group_m 4 or 16, no
cluster, mma_depth 0, one store box, bn 128 with one consumer) at 4096^3 and 8192^3, each judged by its stage's
judge, beside cuBLAS and cuBLASLt's FP8 GEMM (default and fast accumulation) of the same run. Writes
results/sweeps/<gpu>_gemm.json (H200 at 7dff942).
Every variant is timed in six rounds, each round timing every variant once (in order, then in reverse), so that a
clock drifting under the load drifts under all alike; a row's median_us is the median of its rounds (round_us).
The H200 GEMM record at 7dff942 timed two passes (pass_us: in order, then reversed); older records timed each
variant once, in order.
The lessons' own sweeps, results/sweeps/<gpu>_lessons.json, are written by tools/record_sweeps.py, not here.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _variants() -> dict:
    """{track: [(stage, params)]}: each track's own bench.SWEEP_VARIANTS, for the tracks that have them."""
    from cudabook import track as tracks
    return {name: tracks.get(name).bench.SWEEP_VARIANTS for name in tracks.TRACKS
            if hasattr(tracks.get(name).bench, "SWEEP_VARIANTS")}


VARIANTS = _variants()


def _write(record, name):
    from cudabook import results
    out = results.RESULTS / "sweeps" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


def _interleaved(runs, time_ms, rounds=6, on_round=lambda r: None):
    """Time every run in `rounds` rounds, each round timing every run once (in order, then in reverse the next
    round), and yield (*run[:-1], [what time_ms gave in each round]). on_round(r) is called as round r begins. A card whose clock drifts under a long tensor-core load
    (the power cap: GEMM 09's clock probe) then drifts under every variant alike: timed one after another, at
    8192^3 on an H200 the same default measured 1,384 us first and 1,566 us last."""
    per = [[] for _ in runs]
    for r in range(rounds):
        on_round(r)
        order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
        for i in order:
            per[i].append(time_ms(runs[i][-1]))
    for run, ms in zip(runs, per):
        yield (*run[:-1], ms)


def _median_fields(rounds: list[dict]) -> dict:
    """One row from a row a round: each number the median of the rounds that have it (a figure against a peer
    is so taken within each round first), anything else from the last round, and `correct` only if every round
    was."""
    out = dict(rounds[-1]) if rounds else {}
    for key in {k for r in rounds for k in r}:
        values = [r[key] for r in rounds if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
        if values:
            out[key] = round(statistics.median(values), 2)
    if any("correct" in r for r in rounds):
        out["correct"] = all(r.get("correct", False) for r in rounds)
    return out


def ladder(gpu, name, keep=lambda size: True):
    """Each of the track's SWEEP_VARIANTS on each of its benchmark workloads that `keep` accepts, judged by the
    stage's own judge (tracks.judge_of), beside the track's peers of the same run: results/sweeps/<gpu>_<name>.json
    (attention and GEMM)."""
    import numpy as np
    from cudabook import bench, results
    from cudabook import track as tracks
    t = tracks.get(name)
    benchmark = t.bench
    rows = []
    for size in benchmark.WORKLOADS:
        if not keep(size):
            continue
        wname = benchmark.workload_name(**size)
        args, problem = benchmark.prepare(size, rng=np.random.default_rng(0))
        ctx = benchmark.context(problem)
        print(f"{wname} (the peers are timed again in each round; a figure against them is a round's, then the "
              f"median):")
        runs = []
        for stage, params in VARIANTS[name]:
            module = t.stage(stage)
            try:
                problem.poison()
                module.launch(problem, **params)
                ok = tracks.judge_of(t, stage)(problem.result(), *args).ok
                launch = (lambda module=module, params=params: module.launch(problem, **params))
                bench.time_ms(launch, repeats=3, batch=5)                    # compiled and warm before any round
            except Exception as e:  # a variant that does not fit is reported, not fatal
                print(f"  {stage:22s} {str(params):34s} not run: {type(e).__name__}: {e}")
                continue
            runs.append((stage, params, ok, launch))
        # Each round: the peers (into a copy of the context, their times the yardstick of that round), then every
        # variant. A figure against a peer is taken within each round and its median kept, so a variant and the
        # peer it is read against were timed minutes apart at most, under the same clock.
        peer_rounds, contexts = {}, []

        def timed(launch):
            if not contexts or len(contexts) <= timed.round:
                ctx_r = dict(ctx)
                for k, v in benchmark.peers(args, problem, ctx_r, repeats=3, progress=lambda *a: None).items():
                    peer_rounds.setdefault(k, []).append(v)
                contexts.append(ctx_r)
            return bench.time_ms(launch, repeats=3, batch=5), contexts[timed.round]
        timed.round = 0
        figure = benchmark.PLOT_KEY
        for stage, params, ok, got in _interleaved(runs, timed, on_round=lambda r: setattr(timed, "round", r)):
            us_r = [ms * 1e3 for ms, _ in got]
            us = statistics.median(us_r)
            row = {"workload": wname, "stage": stage, "params": params, "median_us": round(us, 1),
                   "round_us": [round(u, 1) for u in us_r], "correct": ok,
                   **_median_fields([benchmark.metrics(problem, u, c) for u, (_, c) in zip(us_r, got)])}
            rows.append(row)
            print(f"  {stage:22s} {str(params):34s} {row['median_us']:9.1f} us {row.get('TFLOPs', float('nan')):7.1f} "
                  f"TFLOP/s {row.get(figure, float('nan')):6.1f} {figure}  {'ok' if ok else 'WRONG'}  "
                  f"(rounds {min(row['round_us'])}-{max(row['round_us'])} us)")
        print(f"  the last round's peers: {benchmark.summary(contexts[-1])}" if contexts else "  no variant ran")
        for k, got in peer_rounds.items():
            timed_rounds = [v["median_us"] for v in got if "median_us" in v]
            row = {"workload": wname, "stage": k, **_median_fields(got)}
            if timed_rounds:
                row["round_us"] = timed_rounds
                print(f"  {k:57s} {row['median_us']:9.1f} us (rounds {min(timed_rounds)}-{max(timed_rounds)})")
            rows.append(row)
    record = {"gpu": gpu.name, "commit": results._commit(), "source_digest": results.source_digest(), "rows": rows}
    _write(record, f"{results.slug(gpu.name)}_{name}.json")


def msda(gpu, locations):
    import numpy as np
    from cudabook import bench, msda, results
    from cudabook.msda import benchmark
    size = dict(benchmark.WORKLOADS[0], locations=locations)
    args, problem = benchmark.prepare(size, rng=np.random.default_rng(0))
    few = tuple(a[:1] if i in (0, 3, 4) else a for i, a in enumerate(args))          # image 0: the check
    want = msda.to_bf16(msda.reference(*few)).astype(np.float32)
    runs = []
    for stage, params in VARIANTS["msda"]:
        module = msda.stage(stage)
        problem.poison()
        module.launch(problem, **params)
        got = problem.result()[:1].astype(np.float32)
        err = float(np.nanmax(np.abs(got - want))) if not np.isnan(got).any() else float("nan")
        runs.append((stage, params, err, lambda module=module, params=params: module.launch(problem, **params)))
    rows = []
    for stage, params, err, ms in _interleaved(runs, lambda launch: bench.time_ms(launch, repeats=3)):
        us = statistics.median(ms) * 1e3
        rows.append({"stage": stage, "params": params, "median_us": round(us, 1),
                     "round_us": [round(m * 1e3, 1) for m in ms], "max_abs_err_image0": err})
        print(f"{stage:22s} {str(params):40s} {us:10.1f} us   max |err| on image 0: {err:.3g}"
              f"  (rounds {min(ms) * 1e3:.1f}-{max(ms) * 1e3:.1f} us)")
    record = {"gpu": gpu.name, "workload": benchmark.workload_name(**size), "commit": results._commit(),
              "source_digest": results.source_digest(), "rows": rows}
    _write(record, f"{results.slug(gpu.name)}_msda_{locations}.json")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--track", choices=sorted(VARIANTS), help="the track whose rungs are swept")
    parser.add_argument("--d", type=int, nargs="+", default=[128, 64], help="attention: the head dims (128 64)")
    parser.add_argument("--locations", choices=("local", "uniform"), default="local",
                        help="msda: the benchmark workload's sampling locations (local)")
    parser.add_argument("--list", action="store_true", help="print the variants, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for track in [args.track] if args.track else sorted(VARIANTS):
            for stage, params in VARIANTS[track]:
                print(f"{track} {stage} {params}")
        return
    if not args.track:
        parser.error("name the track: --track " + "|".join(sorted(VARIANTS)))
    from cudabook import device
    gpu = device.gpu()
    if gpu is None:
        sys.exit(f"needs a GPU: {device.why_no_gpu()}")
    if args.track == "attention":
        ladder(gpu, "attention", keep=lambda size: size["d"] in args.d)
    elif args.track == "msda":
        msda(gpu, args.locations)
    else:
        ladder(gpu, args.track)


if __name__ == "__main__":
    main()
