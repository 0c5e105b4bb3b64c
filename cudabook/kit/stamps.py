"""Inside one block of a running kernel: when each warpgroup reached which point, measured, not drawn by hand.

A stage names points in its kernel's source (`STAMPS`: a label, a pattern that finds one line of the kernel's
body, and whether the stamp goes before or after that line). `instrument` returns a copy of the source with a
stamp at each point: in one chosen block, the first thread of every warpgroup writes the point's number and
`clock64()` (the SM's cycle counter) to a buffer whose address is written into the text; the first and last
stamps also read `%globaltimer`, which turns cycles into nanoseconds. The kernel's file is not touched: the
copy is compiled like a learner's text (launch(..., kernel=text)), so the records of the stage stand.

`decode` turns the buffer into each warpgroup's events; a warpgroup is in state X from a stamp labelled X to
its next stamp, so a point is named for what follows it ("wait full": the wait for a full stage begins).
`tools/probe_stamps.py` records a stage's run on a GPU in results/readings/<gpu>_<track>_<stage>_stamps.json,
with the stage's time with and without the stamps (what they cost); cudabook.timeline.show_stamps draws and
sums up a record.
"""
from __future__ import annotations

import dataclasses
import re

CAPACITY = 1024          # stamps a warpgroup keeps (later ones are counted, not kept)
WARPGROUPS = 4           # at most, a block
KIND_SHIFT = 56
START, END, CLOCK_START, CLOCK_END = "start", "end", 62, 63


@dataclasses.dataclass(frozen=True)
class Point:
    """A stamp: `label` names the state that follows it; `pattern` (a regular expression) finds the line of the
    kernel's body it goes `before` or after; `nth`: which match, when the pattern matches more than one line."""
    label: str
    pattern: str
    before: bool = False
    nth: int = 0


def _body(text: str, kernel: str) -> tuple[int, int]:
    """(index just after the kernel body's opening brace, index of its closing brace)."""
    m = re.search(r"__global__[^;{]*?\b" + re.escape(kernel) + r"\s*\(", text, flags=re.S)
    if m is None:
        raise ValueError(f"no __global__ function {kernel!r} in the source")
    depth, i = 1, m.end()
    while depth:                                   # the parameter list
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    start = text.index("{", i) + 1
    depth, j = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return start, j - 1


def instrument(text: str, kernel: str, points, address: int, *, block: int = 0,
               capacity: int = CAPACITY, thread: int = 0) -> str:
    """`text` with a stamp at each point of `kernel`'s body, plus "start" and "end" around it, writing to the
    buffer at device `address` (WARPGROUPS * capacity 64-bit words, then a counter a warpgroup). The thread
    `thread` (0-127) of each warpgroup stamps. A ValueError names a point whose pattern finds no line (the kernel
    changed under it)."""
    if not 0 <= thread < 128:
        raise ValueError(f"thread must be 0..127 (a thread of each warpgroup), got {thread}")
    start, end = _body(text, kernel)
    body = text[start:end]
    inserts = []                                   # (position in body, code)
    for k, p in enumerate(points, start=1):
        matches = list(re.finditer(p.pattern, body))
        if len(matches) <= p.nth:
            raise ValueError(f"stamp {p.label!r}: the pattern {p.pattern!r} finds {len(matches)} line(s) in "
                             f"{kernel}, not a match number {p.nth}: the kernel changed; update the stage's STAMPS")
        m = matches[p.nth]
        line_start = body.rfind("\n", 0, m.start()) + 1
        line_end = body.find("\n", m.end())
        line_end = len(body) if line_end < 0 else line_end
        indent = re.match(r"\s*", body[line_start:]).group(0)
        if p.before:
            inserts.append((line_start, f"{indent}CUDABOOK_STAMP({k});\n"))
        else:
            inserts.append((line_end, f"\n{indent}CUDABOOK_STAMP({k});"))
    for pos, code in sorted(inserts, key=lambda x: x[0], reverse=True):
        body = body[:pos] + code + body[pos:]
    last = len(points) + 1
    head = (f"\n  unsigned cudabook_stamp_n = 0;\n"
            f"  const bool cudabook_stamp_on = blockIdx.x == {block} && blockIdx.y == 0 && blockIdx.z == 0 && "
            f"threadIdx.x % 128 == {thread};\n"
            f"  CUDABOOK_TIMER({CLOCK_START});\n  CUDABOOK_STAMP(0);")
    tail = f"\n  CUDABOOK_STAMP({last});\n  CUDABOOK_TIMER({CLOCK_END});\n  CUDABOOK_COUNT();\n"
    # a return inside the body would skip the end stamp: stamp it there too
    body = re.sub(r"\breturn\s*;", f"{{ CUDABOOK_STAMP({last}); CUDABOOK_TIMER({CLOCK_END}); CUDABOOK_COUNT(); "
                  f"return; }}", body)
    macros = f"""
// ---- stamps added by cudabook.kit.stamps (not part of the stage's kernel) ----
#define CUDABOOK_STAMP_PUT(kind, value) do {{ const unsigned long long cudabook_v = (value); \
    if (cudabook_stamp_on && cudabook_stamp_n < {capacity}) \
      ((unsigned long long*){address:#x}ull)[(threadIdx.x / 128) * {capacity} + cudabook_stamp_n] = \
        ((unsigned long long)(kind) << {KIND_SHIFT}) | (cudabook_v & ((1ull << {KIND_SHIFT}) - 1)); \
    ++cudabook_stamp_n; }} while (0)
#define CUDABOOK_COUNT() do {{ if (cudabook_stamp_on) \
    ((unsigned long long*){address:#x}ull)[{WARPGROUPS * capacity} + threadIdx.x / 128] = cudabook_stamp_n; }} while (0)
#define CUDABOOK_STAMP(kind) CUDABOOK_STAMP_PUT(kind, clock64())
#define CUDABOOK_TIMER(kind) do {{ unsigned long long cudabook_t; \\
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(cudabook_t)); CUDABOOK_STAMP_PUT(kind, cudabook_t); }} while (0)
"""
    return macros + text[:start] + head + body + tail + text[end:]


def words(capacity: int = CAPACITY) -> int:
    """The buffer's size in 64-bit words."""
    return WARPGROUPS * capacity + WARPGROUPS


def decode(buffer, points, capacity: int = CAPACITY) -> list[dict]:
    """[{warpgroup, events: [(label, ns from the block's first stamp)], dropped}] for each warpgroup that
    stamped, its cycles turned into ns by its own globaltimer pair (None where that is missing)."""
    labels = [START, *(p.label for p in points), END]
    out, origin = [], None
    for wg in range(WARPGROUPS):
        n = int(buffer[WARPGROUPS * capacity + wg])
        if n == 0:
            continue
        raw = [int(w) for w in buffer[wg * capacity: wg * capacity + min(n, capacity)]]
        kinds = [(w >> KIND_SHIFT, w & ((1 << KIND_SHIFT) - 1)) for w in raw]
        timer = {k: v for k, v in kinds if k in (CLOCK_START, CLOCK_END)}
        clocks = [(k, v) for k, v in kinds if k not in (CLOCK_START, CLOCK_END)]
        first = clocks[0][1] if clocks else 0
        last = next((v for k, v in reversed(clocks) if k == len(labels) - 1), None)
        ns_per_clock = None
        if len(timer) == 2 and last is not None and last > first:
            ns_per_clock = (timer[CLOCK_END] - timer[CLOCK_START]) / (last - first)
        out.append({"warpgroup": wg, "dropped": max(0, n - capacity), "ns_per_clock": ns_per_clock,
                    "start_ns": timer.get(CLOCK_START),
                    "events": [(labels[k] if k < len(labels) else f"?{k}", v - first) for k, v in clocks]})
    for wg in out:                                 # one time axis for the block: its warpgroups' globaltimer starts
        if wg["start_ns"] is not None:
            origin = wg["start_ns"] if origin is None else min(origin, wg["start_ns"])
    for wg in out:
        scale = wg["ns_per_clock"] or 1.0
        shift = (wg["start_ns"] - origin) if wg["start_ns"] is not None and origin is not None else 0
        wg["events"] = [(label, round(shift + c * scale, 1)) for label, c in wg["events"]]
    return out


def spans(events) -> list[tuple[str, float, float]]:
    """(state, from ns, to ns): a warpgroup is in the state its last stamp names until its next stamp."""
    return [(a[0], a[1], b[1]) for a, b in zip(events, events[1:])]


def summary(record: dict) -> dict:
    """{warpgroup: {state: share of that warpgroup's time from start to end}}."""
    out = {}
    for wg in record["warpgroups"]:
        total = {}
        for state, t0, t1 in spans(wg["events"]):
            total[state] = total.get(state, 0.0) + (t1 - t0)
        whole = sum(total.values()) or 1.0
        out[wg["warpgroup"]] = {k: v / whole for k, v in total.items()}
    return out


def covered(record: dict, state: str) -> float:
    """The share of the block's time (its first stamp to its last) in which at least one warpgroup is in
    `state`. Only what the stamps say: where a kernel keeps a group of wgmmas in flight past its wait (GEMM 07,
    MMA_DEPTH 1), the tensor cores also work in the states after "mma", and this undercounts them."""
    spans_in = sorted((t0, t1) for wg in record["warpgroups"] for s, t0, t1 in spans(wg["events"]) if s == state)
    times = [t for wg in record["warpgroups"] for _, t in wg["events"]]
    whole = (max(times) - min(times)) if times else 0.0
    total, current = 0.0, None
    for t0, t1 in spans_in:
        if current is None or t0 > current[1]:
            total += (current[1] - current[0]) if current else 0.0
            current = [t0, t1]
        else:
            current[1] = max(current[1], t1)
    total += (current[1] - current[0]) if current else 0.0
    return total / whole if whole else 0.0
