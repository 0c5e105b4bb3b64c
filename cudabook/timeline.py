"""Measured kernel timelines (tools/probe_timeline.py: each kernel's start and end as CUPTI saw them, over a few
calls back to back, for each of some settings), read back and drawn: results/readings/<gpu>_<track>_<stage>_timeline.json.

The first call of each timeline is left out of what is drawn and counted: it follows the sleeping kernel the
calls were queued behind (in the earliest records, the profiler's own start-up), not a call like the others.
"""
from __future__ import annotations


from . import results
from .kit import stamps


def load(track: str, stage: str) -> list[dict]:
    """Every card's recorded timeline of (track, stage) (the stage by name or number), newest last."""
    from . import track as tracks
    try:
        t = tracks.get(track)
        stage = t.stage(stage).NAME
    except Exception:     # an unknown track or stage: look for the name as given
        pass
    return results.readings(track, stage, "timeline")


def calls(run: dict, per_call: int) -> list[list[dict]]:
    """The run's kernels cut into calls of `per_call` kernels each, the first call left out."""
    k = run["kernels"]
    return [k[i:i + per_call] for i in range(per_call, len(k) - per_call + 1, per_call)]


def per_call(record: dict, run: dict) -> int | None:
    """Kernels a call of this run launches: as recorded, else its kernels over its calls; None when they do not
    share out evenly (a kernel lost from the trace, or one more)."""
    if run.get("per_call"):
        return run["per_call"]
    calls_made = max(1, record["calls"])
    return len(run["kernels"]) // calls_made if len(run["kernels"]) % calls_made == 0 and run["kernels"] else None


def steps(run: dict, per: int) -> list[dict]:
    """Between each kernel and the next (first call left out): the next one's start minus this one's end (a
    negative gap: they overlapped), with both names; and each call's period (start of a call to the next's)."""
    kernels = [k for call in calls(run, per) for k in call]
    out = [{"from": a["name"], "to": b["name"], "gap_us": round(b["start_us"] - a["end_us"], 2)}
           for a, b in zip(kernels, kernels[1:])]
    starts = [c[0]["start_us"] for c in calls(run, per)]
    return out, [round(b - a, 2) for a, b in zip(starts, starts[1:])]


def show(track: str, stage: str):
    """Draw each card's recorded timeline of (track, stage), a panel a setting, and print the gaps and the
    periods; or say that none is recorded and how to record one."""
    import matplotlib.pyplot as plt
    found = load(track, stage)
    if not found:
        print(f"No timeline of {track} {stage} recorded yet: on a GPU, "
              f"python tools/probe_timeline.py --track {track} --stage {stage}")
        return []
    for record in found:
        runs = record["runs"]
        names = list(dict.fromkeys(k["name"] for run in runs for k in run["kernels"]))
        fig, axes = plt.subplots(len(runs), 1, figsize=(9, 0.9 + 0.55 * len(names) * len(runs)), squeeze=False)
        print(f"{record['gpu']}, {record['workload']}, commit {record['commit']} ({record['date'][:10]}), "
              f"{record['calls']} calls back to back, the first left out:")
        for ax, run in zip(axes[:, 0], runs):
            label = ", ".join(f"{k}={v}" for k, v in run["settings"].items()) or "defaults"
            per = per_call(record, run)
            kept = calls(run, per) if per else []
            if not kept:
                print(f"  {label}: {len(run['kernels'])} kernels for {record['calls']} calls do not share out "
                      f"evenly; not drawn")
                ax.set_axis_off()
                continue
            t0 = kept[0][0]["start_us"]
            for c, call in enumerate(kept):
                for k in call:
                    row = names.index(k["name"])
                    ax.broken_barh([(k["start_us"] - t0, k["end_us"] - k["start_us"])], (row - 0.35, 0.7),
                                   color=f"C{c % 10}", alpha=0.85)
            ax.set_yticks(range(len(names)), names, fontsize=8)
            ax.invert_yaxis()
            ax.set_title(f"{record['gpu']}: {label} (a colour a call)", fontsize=9)
            ax.set_xlabel("µs (CUPTI's start and end of each kernel)", fontsize=8)
            gaps, periods = steps(run, per)
            print(f"  {label}: a call every {', '.join(f'{p:.1f}' for p in periods)} µs; between kernels: "
                  + "; ".join(f"{g['from']} → {g['to']} {g['gap_us']:+.2f}" for g in gaps[:2 * per]) + " µs")
        plt.tight_layout()
        plt.show()
    return found


# ---- inside one block: cudabook.kit.stamps records, drawn
def load_stamps(track: str, stage: str) -> list[dict]:
    """Every card's recorded stamps of (track, stage), newest last."""
    return results.readings(track, stage, "stamps")


STAMP_COLOURS = {"wait full": "#bbbbbb", "wait empty": "#bbbbbb", "mma": "#4c72b0", "issue": "#55a868",
           "release": "#8172b2", "epilogue": "#dd8452", "tile": "#ccb974", "start": "#eeeeee", "end": "#ffffff"}


def show_stamps(track: str, stage: str, *, window_us: float | None = 6.0):
    """Print each warpgroup's share of time in each state and what the stamps cost, for the newest record of
    (track, stage), and draw it: the whole block, then its first `window_us` microseconds (None: the whole block
    alone). Says so, and returns None, when there is no record."""
    records = load_stamps(track, stage)
    if not records:
        print(f"No stamps of {track} {stage} in results/readings/ yet: `python tools/probe_stamps.py --track "
              f"{track} --stage {stage}` on a GPU that runs it records them.")
        return None
    rec = records[-1]
    print(f"{rec['gpu']}, commit {rec['commit']}, {rec['workload']}: block {rec['block']}; "
          f"the stage took {rec['plain_us']:,.1f} µs a call without stamps, {rec['stamped_us']:,.1f} µs with them")
    for wg, shares in stamps.summary(rec).items():
        print(f"  warpgroup {wg}: " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in
                                               sorted(shares.items(), key=lambda kv: -kv[1]) if v >= 0.005))
    if any(s == "mma" for wg in rec["warpgroups"] for s, _ in wg["events"]):
        print(f"  at least one warpgroup in the state mma: {100 * stamps.covered(rec, 'mma'):.0f} % of the block's time")
    import matplotlib.pyplot as plt
    windows = [None] if window_us is None else [None, window_us]
    rows = len(rec["warpgroups"])
    fig, axes = plt.subplots(len(windows), 1, figsize=(11, len(windows) * (0.9 + 0.55 * rows) + 0.6),
                             squeeze=False)
    for ax, window in zip(axes[:, 0], windows):
        _draw_stamps(ax, rec, window)
        ax.set_title(f"{track} {stage}: one block, as it ran ({rec['gpu']})"
                     + (f", its first {window:g} µs" if window else ""))
    fig.tight_layout()
    return fig


def _draw_stamps(ax, rec, window_us):
    seen = set()
    for row, wg in enumerate(rec["warpgroups"]):
        for state, t0, t1 in stamps.spans(wg["events"]):
            if window_us is not None and t0 / 1e3 > window_us:
                break
            ax.barh(row, (t1 - t0) / 1e3, left=t0 / 1e3, color=STAMP_COLOURS.get(state, "#999999"), height=0.7,
                    label=None if state in seen else state)
            seen.add(state)
    ax.set_yticks(range(len(rec["warpgroups"])))
    ax.set_yticklabels([f"warpgroup {wg['warpgroup']}" for wg in rec["warpgroups"]])
    ax.invert_yaxis()
    ax.set_xlabel("µs from the block's start (measured: clock64 stamps, globaltimer-scaled)")
    if window_us is not None:
        ax.set_xlim(0, window_us)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
