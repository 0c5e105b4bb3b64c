"""A profile as a table: one row of derived quantities per kernel (µs, MB, GB/s, percentages, stalls largest
first), and the Profile that shows them in a notebook or a terminal."""
from __future__ import annotations

import re

from .metrics import COLUMN_NOTES, COLUMNS, L1_NOTES, METRICS, PIPE_NOTES, PIPES, STALL_FAMILIES
from .parsing import short_name


def derive(kernel: dict, stage: str | None = None) -> dict:
    """One row of the table from one kernel's counters (base units): µs, MB, GB/s, percentages, the stalls
    sorted largest first."""
    m = kernel.get("metrics", {})

    def get(key):
        for name in METRICS[key]:
            if m.get(name) is not None:
                return m[name]
        return None

    row = {"stage": stage, "kernel": kernel.get("kernel") or short_name(kernel.get("function", "?")),
           "function": kernel.get("function"), "block": kernel.get("block"), "grid": kernel.get("grid")}
    ns = get("duration")
    row["duration_us"] = ns / 1e3 if ns is not None else None
    row["dram_pct"] = get("dram_pct")
    read, write, total = get("dram_read"), get("dram_write"), get("dram_bytes")
    row["dram_read_MB"] = read / 1e6 if read is not None else None
    row["dram_write_MB"] = write / 1e6 if write is not None else None
    if total is None and read is not None and write is not None:
        total = read + write
    row["dram_MB"] = total / 1e6 if total is not None else None
    per_s = get("dram_per_second")
    if per_s is None and total is not None and ns:
        per_s = total / (ns * 1e-9)
    row["dram_GBps"] = per_s / 1e9 if per_s is not None else None
    sectors, requests = get("load_sectors"), get("load_requests")
    row["load_sectors"], row["load_requests"] = sectors, requests
    row["sectors_per_request"] = sectors / requests if sectors is not None and requests else None
    row["l1_hit_pct"] = get("l1_hit")
    row["l1_pipe_pct"] = get("l1_pipe")
    row["l2_hit_pct"] = get("l2_hit")
    row["occupancy_pct"] = get("occupancy")
    row["theoretical_occupancy_pct"] = get("theoretical_occupancy")
    row["registers"] = get("registers")
    row["issue_pct"] = get("issue")
    pipes = {p: get(f"pipe_{p}") for p in PIPES}
    row["pipes_pct"] = {p: v for p, v in pipes.items() if v is not None}
    top = max(row["pipes_pct"].items(), key=lambda kv: kv[1], default=None)
    row["busiest_pipe"] = f"{top[0]} {top[1]:.1f}" if top else None
    stalls, unit = {}, None
    for family, label in STALL_FAMILIES:
        pattern = re.compile("^" + re.escape(family).replace(r"\{\}", r"([a-z_]+?)") + "$")
        found = {mm.group(1): m[name] for name in m if (mm := pattern.match(name)) and m[name] is not None}
        if found:
            stalls, unit = found, label
            break
    stalls.pop("selected", None)            # issuing, not stalled
    row["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    row["stall_unit"] = unit
    return row


class Profile(list):
    """One dict per kernel (see derive() for the keys), in the order the stages launched them, plus where the
    numbers come from: `label` ("measured now on ..." or "recorded on ..."), `gpu`, `track`, `workload`, and
    per stage `stages[stage]` = {"workload", "min_bytes", "params", ...}."""

    def __init__(self, rows=(), *, track=None, gpu=None, label="", ncu=None, stages=None, date=None):
        super().__init__(rows)
        self.track, self.gpu, self.label, self.ncu, self.date = track, gpu, label, ncu, date
        self.stages = stages or {}

    @property
    def workload(self):
        names = {s.get("workload") for s in self.stages.values() if s.get("workload")}
        return names.pop() if len(names) == 1 else ", ".join(sorted(names)) or None

    def kernel(self, stage=None, name=None) -> dict | None:
        """The row of a kernel: of `stage` (a name or its number), named `name` (part of the kernel's name),
        by default the one that ran longest (a stage's main kernel rather than its prepass)."""
        def of_stage(r):
            if stage is None or r["stage"] == stage:
                return True
            return str(stage).isdigit() and (r["stage"] or "")[:2].isdigit() and int(r["stage"][:2]) == int(stage)
        rows = [r for r in self if of_stage(r)]
        if name:
            rows = [r for r in rows if name in r["kernel"]]
        return max(rows, key=lambda r: r.get("duration_us") or 0) if rows else None

    def min_bytes(self, stage) -> int | None:
        """The fewest bytes the stage's problem needs (read every input once, write the output once)."""
        return self.stages.get(stage, {}).get("min_bytes")

    def _cells(self):
        cols = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in self)]
        body = []
        for r in self:
            cells = [fmt.format(r[key]) if r.get(key) is not None else "–" for _, key, fmt in cols]
            stalls = ", ".join(f"{k} {v:.0f}" if (r.get("stall_unit") or "").startswith("%") else f"{k} {v:.1f}"
                               for k, v in list(r["stalls"].items())[:3])
            body.append(cells + [stalls or "–"])
        unit = next((r["stall_unit"] for r in self if r.get("stall_unit")), None)
        heads = [h for h, _, _ in cols] + [f"top stalls ({unit})" if unit else "top stalls"]
        return heads, body

    def notes(self) -> str:
        """What the columns mean: the L1's and the pipes' notes only where a row has them."""
        l1 = " " + L1_NOTES if any(r.get("l1_hit_pct") is not None or r.get("l1_pipe_pct") is not None
                                   for r in self) else ""
        return COLUMN_NOTES + l1 + (" " + PIPE_NOTES if any(r.get("issue_pct") is not None or r.get("busiest_pipe")
                                                            for r in self) else "")

    def caption(self) -> str:
        parts = [self.label]
        if self.workload:
            parts.append(self.workload)
        return " · ".join(p for p in parts if p)

    def __repr__(self):
        if not self:
            return f"<empty profile: {self.caption()}>"
        heads, body = self._cells()
        widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(heads)]
        lines = [self.caption(),
                 "  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip()]
        for b in body:
            lines.append("  ".join(c.rjust(w) if i > 1 and i < len(b) - 1 else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(b, widths))).rstrip())
        return "\n".join(lines + [self.notes()])

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self):
        import html
        heads, body = self._cells()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in b) + "</tr>" for b in body)
        return (f"<table><caption style='text-align:left'>{html.escape(self.caption())}</caption>"
                f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
                f"<p style='font-size:smaller'>{html.escape(self.notes())}</p>")
