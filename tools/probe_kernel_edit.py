"""A rung against an edited copy of its own kernel, in interleaved rounds (GPU): an idea measured before it is
made a setting of the rung.

The edit is a Python file (tools/kernel_edits/) with TRACK and STAGE, the rung it edits, and `edit(text) -> text`, which rewrites the rung's CUDA C++ source (asserting that
what it replaces is there, so an edit that no longer fits the kernel fails loudly), and a docstring saying what
it tries. An edit that needs the host to launch it differently (another tensor map box, say) also defines
`host(stage_module)`, which patches the host for the edited text alone; the probe calls it first. An edit
meant for other settings than the rung's defaults names them in PARAMS (--params adds to them).

For each workload of the track's benchmark (or the first, by default): fresh inputs, the rung and the edited
copy each judged against the float64 reference, then both timed in the same interleaved rounds
(bench.head_to_head). The kernel files are not touched. Prints the rung's time over the edit's (above 1, the
edit is faster) and writes the rounds to results/readings/<gpu>_<track>_<stage>_edit_<the edit's name>.json
(--out: another folder), which a lesson prints with cudabook.results.show_edits(track, stage).

    python tools/probe_kernel_edit.py --edit tools/kernel_edits/msda05_shared_locations.py --workloads all
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudabook import bench, device, results  # noqa: E402  (decides simulator or GPU before numba is imported)
from cudabook import track as tracks  # noqa: E402


def load_edit(path):
    """The edit module at `path` (cudabook.edits.load)."""
    from cudabook import edits
    return edits.load(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edit", required=True, help="a Python file defining TRACK, STAGE and edit(text) -> text")
    ap.add_argument("--params", default="{}", help="the rung's parameters for both (JSON; added to the edit's PARAMS)")
    ap.add_argument("--workloads", choices=("first", "all"), default="first")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--sustained", type=float, default=0.0, metavar="SECONDS",
                    help="also run each back to back for SECONDS, in the order rung, edited, edited, rung "
                         "(bench.sustained: what a long job sees, once the card's power cap holds its clock)")
    ap.add_argument("--out", help="the folder to write to (default results/readings/)")
    a = ap.parse_args(argv)
    edit = load_edit(a.edit)
    t, stage = tracks.get(edit.TRACK), edit.STAGE
    module, judge = t.stage(stage), tracks.judge_of(t, stage)
    from cudabook import edits
    base = edits.rung_text(edit, module)             # the rung's kernel now, or at the edit's BASE if adopted
    edited = edit.edit(base)
    rung = base if hasattr(edit, "BASE") else None
    if hasattr(edit, "host"):
        edit.host(module)
    why = t.unavailable(stage)
    if why:
        print(f"{stage} cannot run here: {why}")
        return 1
    params = {**getattr(edit, "PARAMS", {}), **json.loads(a.params)}
    import datetime
    record = {"track": t.NAME, "stage": stage,
              "kind": f"{t.NAME} {stage} against an edited copy of its kernel, in interleaved rounds",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "edit": pathlib.Path(a.edit).name, "what": (edit.__doc__ or "").strip(), "params": params,
              "gpu": device.gpu().name, "commit": results._commit(), "cases": []}
    if hasattr(edit, "BASE"):
        record["rung_at"] = edit.BASE                # an adopted edit: "rung" is the kernel before it
    sizes = t.bench.WORKLOADS if a.workloads == "all" else t.bench.WORKLOADS[:1]
    for size in sizes:
        name = t.bench.workload_name(**size)
        args, problem = t.bench.prepare(size)
        correct = {}
        for which, kernel in (("rung", rung), ("edited", edited)):
            problem.poison()
            module.launch(problem, kernel=kernel, **params)
            correct[which] = bool(judge(problem.result(), *args).ok)
        calls = {"rung": lambda: module.launch(problem, kernel=rung, **params),
                 "edited": lambda: module.launch(problem, kernel=edited, **params)}
        got = bench.head_to_head(calls, rounds=a.rounds)
        ratio = statistics.median(r / e for r, e in zip(got["rung"], got["edited"]))
        us = {k: [round(ms * 1e3, 2) for ms in v] for k, v in got.items()}
        case = {"workload": name, "correct": correct, "us": us, "rung / edited": round(ratio, 4)}
        print(f"{name}: rung / edited = {ratio:.3f}x (median of {a.rounds} rounds; rung "
              f"{statistics.median(us['rung']):,.1f} µs, edited {statistics.median(us['edited']):,.1f} µs), "
              f"correct: {correct}", flush=True)
        if a.sustained > 0:
            long = bench.sustained(calls, seconds=a.sustained)
            case["sustained"] = {"seconds": a.sustained, "us": {k: [round(ms * 1e3, 2) for ms in v]
                                                                for k, v in long.items()}}
            mean = {k: statistics.mean(v) for k, v in long.items()}
            case["sustained"]["rung / edited"] = round(mean["rung"] / mean["edited"], 4)
            print(f"   back to back, {a.sustained:g} s each (rung, edited, edited, rung): rung / edited = "
                  f"{mean['rung'] / mean['edited']:.3f}x (rung {mean['rung'] * 1e3:,.1f} µs, edited "
                  f"{mean['edited'] * 1e3:,.1f} µs)", flush=True)
        record["cases"].append(case)
        del problem
    print(f"wrote {results.write_reading(record, f'edit_{pathlib.Path(a.edit).stem}', a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
