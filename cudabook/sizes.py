"""Speed across problem sizes: each track's fast rungs and its peers, one line each, in the manner of Triton's
perf_report plots.

tools/sweep_sizes.py times them on a GPU and writes results/sizes/<gpu>_<track>.json, one file per card and
track. Here those records are read (`load`), drawn (`figure`), tabulated (`table`), and shown in a lesson
(`show`), on any machine.

A record:
    schema, kind ("cudabook size sweep"), track, gpu, commit, dirty, source_digest, date, machine
    x          the size key(s) along the x axis, varied together (["N"], ["M", "N", "K"], ["D"], ["Lq"])
    panels     the other keys that vary: one panel per combination of their values (attention: ["d", "causal"])
    fixed      the keys every size shares, with their values
    plot_key, plot_label   the track's figure (its bench module's PLOT_KEY, PLOT_LABEL)
    stages, peers          the names measured, in order
    repeats, slow_ms, complete (false while the sweep runs, or where it stopped early), seconds
    sizes      [{size, workload, context, seconds} or {size, workload, error}], in the order measured
    rows       [{size, stage, peer (bool), median_us, the track's figures, correct, params}], or with `error` or
               `skipped` (a reason) in place of the figures
Every figure is computed as the track's benchmark computes it (its bench module's prepare, context, metrics,
peers), so a row at the benchmark's own size reads like the benchmark's table.
"""
from __future__ import annotations

import json
import math
import pathlib

from . import results
from . import track as tracks

KIND = "cudabook size sweep"
RECORD_TOOL = "python tools/sweep_sizes.py"



def sizes_folder(where=None) -> pathlib.Path:
    """results/sizes/, or `where`."""
    return pathlib.Path(where) if where is not None else pathlib.Path(results.RESULTS) / "sizes"


def plan(track, values=None) -> dict:
    """{x, values, sizes, panels, fixed}: the sizes a track is swept over, grouped by panel, x ascending within
    one. `values` replaces the x values.

    The track's bench.SIZE_PLAN says what it sweeps: the key(s) along the x axis (`x`, set together) and their
    `values`; the other keys come from the benchmark's workloads, every one of them (`workloads="all"`:
    attention's d x causal become the panels) or the first."""
    t = tracks.get(track)
    p = t.bench.SIZE_PLAN
    x, values = list(p["x"]), sorted(values or p["values"])
    bases = t.bench.WORKLOADS if p["workloads"] == "all" else t.bench.WORKLOADS[:1]
    sizes = [dict(base, **{k: v for k in x}) for base in bases for v in values]
    panels, fixed = varied(sizes, x)
    return {"x": x, "values": values, "sizes": sizes, "panels": panels, "fixed": fixed}


def varied(sizes, x) -> tuple[list, dict]:
    """(the keys other than x whose values differ between sizes, {every other key: its one value})."""
    keys = [k for k in sizes[0] if k not in x]
    panels = [k for k in keys if any(results.json_plain(s.get(k)) != results.json_plain(sizes[0].get(k)) for s in sizes)]
    return panels, {k: sizes[0][k] for k in keys if k not in panels}


def panel_key(size, x) -> str:
    """One canonical string per panel: the size without its x keys."""
    return json.dumps(results.json_plain({k: v for k, v in size.items() if k not in x}), sort_keys=True)


# ----------------------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------------------
def path_for(gpu: str, track, where=None) -> pathlib.Path:
    return sizes_folder(where) / f"{results.slug(gpu)}_{tracks.get(track).NAME}.json"


def check(record, where="record") -> dict:
    """The record, or RecordError naming the file and the missing or malformed field."""
    need = results.require_field
    need(where, record, "track", str)
    need(where, record, "gpu", str)
    for key in ("x", "panels", "rows"):
        need(where, record, key, list)
    for i, row in enumerate(record["rows"]):
        at = f"rows[{i}]."
        need(where, row, "size", dict, at)
        need(where, row, "stage", str, at)
        if "error" in row or "skipped" in row:
            continue
        need(where, row, "median_us", (int, float), at)
        if not 0 < row["median_us"] < 1e9:
            raise results.RecordError(f"{where}: {at}median_us is {row['median_us']}: a time must be positive")
    return record


def load(track, folder=None) -> list[dict]:
    """The recorded size sweeps of a track, one per card (results/sizes/<gpu>_<track>.json), by card name. A
    file that cannot be read is named and skipped."""
    t = tracks.get(track)
    found = []
    for path in sorted(sizes_folder(folder).glob(f"*_{t.NAME}.json")):
        try:
            record = results.read_record(path, check)
        except (OSError, results.RecordError) as e:
            print(f"(skipping {path.name}: {e})")
            continue
        if record["track"] == t.NAME:
            found.append(record)
    return sorted(found, key=lambda r: r["gpu"])


def save(record, where=None) -> pathlib.Path:
    """Write the record to results/sizes/<gpu>_<track>.json (or `where`), through a temporary file beside it:
    a reader never sees half a file."""
    return results.write_json(path_for(record["gpu"], record["track"], where), results.json_plain(record))


# ----------------------------------------------------------------------------------------------------------
# Drawing and tables
# ----------------------------------------------------------------------------------------------------------
def _matches(size, where) -> bool:
    return all(results.json_plain(size.get(k)) == results.json_plain(v) for k, v in (where or {}).items())


def _names(record) -> tuple[list, set]:
    """(stage and peer names in order: the record's stages, its peers, then any other row's; the peers' names)."""
    names = list(record.get("stages", [])) + [p for p in record.get("peers", []) if p not in record.get("stages", [])]
    peers = set(record.get("peers", []))
    for row in record["rows"]:
        if row["stage"] not in names:
            names.append(row["stage"])
        if row.get("peer"):
            peers.add(row["stage"])
    return names, peers


def _short(key, value) -> str:
    if isinstance(value, (list, tuple)):
        return f"{len(value)} {key}"
    return f"{key}={value}"


def label(record, key) -> str:
    """The y axis's label for a figure of the record's track."""
    spec = tracks.get(record["track"]).bench
    if key == (record.get("plot_key") or spec.PLOT_KEY):
        return record.get("plot_label") or spec.PLOT_LABEL
    return next((head for head, k, _ in spec.COLUMNS if k == key), key)


def _combos(record, rows):
    """The panels' value combinations, in the order the sizes were measured."""
    combos = []
    for row in rows:
        combo = tuple(results.json_plain(row["size"].get(k)) for k in record["panels"])
        if combo not in combos:
            combos.append(combo)
    return combos or [()]


def _x(record, size):
    return size.get(record["x"][0])


def _scale_x(ax, values):
    """A log2 axis where the values double, a log axis where they span 8x or more, ticks at the values."""
    values = sorted(set(values))
    if len(values) >= 2 and all(b == 2 * a for a, b in zip(values, values[1:])):
        ax.set_xscale("log", base=2)
    elif len(values) >= 2 and values[0] > 0 and values[-1] / values[0] >= 8:
        ax.set_xscale("log")
    ax.set_xticks(values, [f"{v:g}" if isinstance(v, float) else str(v) for v in values])
    ax.set_xticks([], minor=True)


def figure(record, *, key=None, where=None):
    """A matplotlib Figure (no pyplot state): the track's figure (PLOT_KEY, or `key`: "TFLOPs", "GBps",
    "median_us", ...) against the x size, a line per stage (solid) and per peer (dashed), a wrong output marked
    with a red x, one panel per combination of the other varied keys (`where`: {key: value} draws only the
    sizes that match), titled with the card and the commit."""
    from matplotlib import rcParams
    from matplotlib.figure import Figure
    spec = tracks.get(record["track"]).bench
    key = key or record.get("plot_key") or spec.PLOT_KEY
    rows = [r for r in record["rows"] if _matches(r["size"], where)]
    combos = _combos(record, rows)
    names, peers = _names(record)
    colors = rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    ncols = min(len(combos), 2)
    nrows = math.ceil(len(combos) / ncols)
    fig = Figure(figsize=(6.4 * ncols, 3.4 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    handles = {}
    xs_all = sorted({_x(record, r["size"]) for r in record["rows"] if _x(record, r["size"]) is not None})
    for ax, combo in zip(axes, combos):
        mine = [r for r in rows if tuple(results.json_plain(r["size"].get(k)) for k in record["panels"]) == combo]
        for i, name in enumerate(names):
            pts = sorted((_x(record, r["size"]), r[key], r.get("correct")) for r in mine
                         if r["stage"] == name and isinstance(r.get(key), (int, float))
                         and not isinstance(r.get(key), bool))
            if not pts:
                continue
            (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], "s--" if name in peers else "o-",
                              color=colors[i % len(colors)], label=name, ms=4)
            handles.setdefault(name, line)
            wrong = [p for p in pts if p[2] is False]
            if wrong:
                (mark,) = ax.plot([p[0] for p in wrong], [p[1] for p in wrong], "x", color="red", ms=9, mew=2,
                                  label="_wrong output")
                handles.setdefault("wrong output", mark)
        if key.startswith("pct_"):
            ax.axhline(100, color="k", lw=0.8, ls=":", label="_100 %")
        if key == "median_us":
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        if xs_all:
            _scale_x(ax, xs_all)
        ax.set_xlabel(" = ".join(record["x"]))
        ax.set_ylabel(label(record, key))
        ax.set_title(", ".join(f"{k}={v}" for k, v in zip(record["panels"], combo)), fontsize=9)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(combos):]:
        fig.delaxes(ax)
    if handles:
        fig.axes[0].legend(list(handles.values()), list(handles), fontsize=7)
    fixed = ", ".join(_short(k, v) for k, v in record.get("fixed", {}).items())
    dirty = " (uncommitted changes)" if record.get("dirty") else ""
    fig.suptitle(f"{record['track']}{' (' + fixed + ')' if fixed else ''} on {record['gpu']}, commit "
                 f"{record.get('commit') or '?'}{dirty}, {(record.get('date') or '?')[:10]}"
                 + ("" if record.get("complete", True) else " (incomplete sweep)"), fontsize=10)
    return fig


def table(record, key=None) -> list[list[str]]:
    """Rows for printing, the header first: the varied keys, then each stage and peer's figure (PLOT_KEY, or
    `key`, e.g. "median_us") at that size; ✗ marks a wrong output, "error" a failure, – a size not run."""
    spec = tracks.get(record["track"]).bench
    key = key or record.get("plot_key") or spec.PLOT_KEY
    fmt = next((f for _, k, f in spec.COLUMNS if k == key), "{:g}")
    names, _ = _names(record)
    keys = list(record["panels"]) + [" = ".join(record["x"])]
    order, cells = [], {}
    for entry in record.get("sizes", []) + record["rows"]:
        size = entry["size"]
        where = tuple(str(results.json_plain(size.get(k))) for k in record["panels"]) + (str(_x(record, size)),)
        if where not in cells:
            order.append(where)
            cells[where] = {}
        if "stage" in entry:
            row = entry
            if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool):
                text = fmt.format(row[key]) + ("" if row.get("correct", True) else " ✗")
            elif "error" in row:
                text = "error"
            else:
                text = "–"
            cells[where][row["stage"]] = text
        elif "error" in entry:
            cells[where]["*"] = "error"
    out = [keys + names]
    for where in order:
        fill = "error" if "*" in cells[where] else "–"
        out.append(list(where) + [cells[where].get(n, fill) for n in names])
    return out


def format_table(rows) -> str:
    """table()'s rows as aligned text."""
    if not rows:
        return ""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in rows)


class Shown(list):
    """The figures show() drew (a plain list underneath), shown in a notebook as one line."""

    def __repr__(self):
        return f"<size sweeps drawn: {len(self)} figure{'s' if len(self) != 1 else ''}>"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


def _display(fig, record, key):
    """In IPython, the figure; elsewhere, its table as text."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(fig)
    else:
        print(format_table(table(record, key)))


def not_today(track, record) -> str | None:
    """Which stages of a size sweep ran with settings other than their defaults today, and how (results.not_today
    of the first row of each stage that recorded its settings), or None."""
    seen, notes = set(), []
    for row in record.get("rows", []):
        stage = row.get("stage")
        if row.get("peer") or stage in seen or not isinstance(row.get("params"), dict):
            continue
        seen.add(stage)
        why = results.not_today(track, stage, row["params"])
        if why:
            notes.append(f"{stage}: {why}")
    return "; ".join(notes) or None


def show(track, *, key=None, where=None, folder=None):
    """For lessons: every recorded card's size sweep of the track, drawn; or, where none is recorded, how to
    record one. Returns the figures (a Shown list), or None."""
    t = tracks.get(track)
    found = load(t, folder)
    if not found:
        print(f"No size sweep of the {t.NAME} track is recorded in results/sizes/ yet. On a GPU, "
              f"`{RECORD_TOOL} --track {t.NAME}` records one (results/sizes/<gpu>_{t.NAME}.json).")
        return None
    shown = Shown()
    for record in found:
        print(f"Recorded on {record['gpu']} at commit {record.get('commit') or '?'} "
              f"({(record.get('date') or '?')[:10]}): timings from that run, not measured on this machine."
              + ("" if record.get("complete", True) else " The sweep did not finish: some sizes are missing."))
        changed = not_today(t, record)
        if changed:
            print(f"  Measured with settings other than the stages' defaults today: {changed}.")
        fig = figure(record, key=key, where=where)
        _display(fig, record, key)
        shown.append(fig)
    return shown
