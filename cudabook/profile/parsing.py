"""Reading ncu's --csv output: values in base units, one dict per kernel, and kernels' short names."""
from __future__ import annotations

import csv
import re


_SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME = {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def _number(text: str):
    text = (text or "").strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def to_base(value, unit: str):
    """A value in ncu's auto-scaled unit -> (value, base unit): 1.5 Mbyte -> 1.5e6 byte; 2 usecond -> 2000
    nsecond. Units without a known prefix pass through."""
    if value is None:
        return None, unit
    unit = (unit or "").strip()
    if unit in _TIME:
        return value * _TIME[unit], "nsecond"
    head, _, tail = unit.partition("/")
    if tail in _TIME and head:       # byte/second, Gbyte/second, byte/usecond ...
        v, base = to_base(value, head)
        return v / _TIME[tail] * 1e9, f"{base}/second"
    m = re.fullmatch(r"([KMGT]?)(byte|sector|request|inst|warp|cycle|thread|block)", unit)
    if m:
        return value * _SCALE[m.group(1)], m.group(2)
    return value, unit


def _rows(text: str):
    """The CSV part of ncu's output: from its header ("ID", ...) on, the lines that are CSV records; ncu's own
    ==PROF== lines and whatever the program printed are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return None, []
    header = next(csv.reader([lines[start]]))
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith('"'):
            continue
        row = next(csv.reader([line]))
        if len(row) == len(header):
            rows.append(dict(zip(header, row)))
    return header, rows


def parse_csv(text: str) -> list[dict]:
    """ncu's --csv output -> one dict per profiled kernel, in launch order:
    {"id", "function" (ncu's name), "kernel" (short name), "block", "grid", "metrics": {name: value in base
    units}, "units": {name: unit}}. Reads the long form (one line per metric: --page details, ncu's default)
    and the wide form (one line per kernel, a second line of units: --page raw)."""
    header, rows = _rows(text)
    if not header:
        return []
    kernels: dict = {}

    def kernel(row):
        key = row.get("ID", str(len(kernels)))
        if key not in kernels:
            kernels[key] = {"id": int(_number(key) or 0), "function": row.get("Kernel Name", "?"),
                            "kernel": short_name(row.get("Kernel Name", "?")), "block": row.get("Block Size"),
                            "grid": row.get("Grid Size"), "metrics": {}, "units": {}}
        return kernels[key]

    if "Metric Name" in header and "Metric Value" in header:          # long form
        for row in rows:
            name = row["Metric Name"]
            if not name:
                continue
            value, unit = to_base(_number(row["Metric Value"]), row.get("Metric Unit", ""))
            k = kernel(row)
            k["metrics"][name] = value
            k["units"][name] = unit
    else:                                                               # wide form
        fixed = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
                 "Stream", "Block Size", "Grid Size", "Device", "CC"}
        units = {}
        for row in rows:
            if not row.get("ID"):              # the line of units
                units = row
                continue
            k = kernel(row)
            for name, text in row.items():
                if name in fixed or "__" not in name:
                    continue
                value, unit = to_base(_number(text), units.get(name, ""))
                k["metrics"][name] = value
                k["units"][name] = unit
    return sorted(kernels.values(), key=lambda k: k["id"])


def short_name(name: str) -> str:
    """'void ns::resample_tma<8>(float const*, ...)' -> 'resample_tma'; a mangled Itanium name
    (_ZN6cudapy8cudabook...14resample_naiveB2v1...) -> 'resample_naive'; Numba's demangled
    'cudapy::cudabook::resample::s01_naive::resample_naive[abi:...](Array<...>)' -> 'resample_naive'."""
    name = (name or "?").strip()
    if name.startswith("_Z"):                         # <length><identifier>... up to the first non-digit
        ids, rest = [], name[3:] if name.startswith("_ZN") else name[2:]
        while (m := re.match(r"\d+", rest)):
            n = int(m.group())
            ids.append(rest[m.end():m.end() + n])
            rest = rest[m.end() + n:]
        return ids[-1] if ids else name
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):                     # drop the argument list and template arguments
        if ch in "(<[" and depth == 0:
            cut = i
            break
    head = name[:cut].strip()
    head = head.split()[-1] if head.split() else head  # drop a return type ("void ")
    return head.split("::")[-1] or name
