"""Nsight Compute from the notebook: what a stage's kernels did, in the GPU's own counters.

    p = profile.profile("resample", "03_coalesced")        # runs ncu now (a GPU and ncu needed)
    p = profile.show("resample", "02_warp_shuffles", "03_coalesced")   # live if it can, else the recorded one
    p.kernel("03_coalesced")["sectors_per_request"]

A profile is one row per kernel a stage launches (a search prepass and its main kernel are two rows): time,
DRAM throughput and bytes, sectors per global load request, L2 hit rate, achieved occupancy, registers per
thread, and the reasons its warps were stalled, largest first.

How it measures. `ncu` runs a small driver, `python -m cudabook.profile --run TRACK STAGE`, that uploads a problem
of the track's first benchmark size (or `size`), launches the stage once to compile and warm up, and then once
more between cuProfilerStart and cuProfilerStop. ncu is started with `--profile-from-start off`, so it measures
exactly the kernels of that second launch, not the uploads, the warm-up or anything else. It replays each
kernel as many times as its counters need (one replay per group of counters) and restores memory between
replays. Clocks are left alone (`--clock-control none`), as the benchmark leaves them, so times compare with the
ladder's; extra ncu options can be given in CUDABOOK_NCU_ARGS.

Records. `python -m cudabook.profile --record TRACK [STAGES...]` writes results/profiles/<gpu>_<track>.json:
the card, driver, CUDA and ncu versions, the workload, and per stage per kernel every counter read. Without a
GPU (or without ncu), `show` draws the recorded profile and says on which card and when it was measured.

Where ncu is: CUDABOOK_NCU, else `ncu` on PATH, else the usual install places (/usr/local/cuda/bin,
/opt/nvidia/nsight-compute/<version>).
"""
from __future__ import annotations

import csv
import datetime
import glob
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from .results import RecordError, read_record, require_field

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROFILES = ROOT / "results" / "profiles"
SCHEMA = 1

# ------------------------------------------------------------------------------------------------ what to read

# Each quantity of the table, with the ncu metric names that give it, preferred first (names change between
# Nsight Compute versions: dram__bytes_read became dram__bytes_op_read in recent ones).
METRICS = {
    "duration": ["gpu__time_duration.sum"],
    "dram_pct": ["dram__throughput.avg.pct_of_peak_sustained_elapsed",
                 "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_bytes": ["dram__bytes.sum"],
    "dram_per_second": ["dram__bytes.sum.per_second"],
    "dram_read": ["dram__bytes_read.sum", "dram__bytes_op_read.sum"],
    "dram_write": ["dram__bytes_write.sum", "dram__bytes_op_write.sum"],
    "load_sectors": ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
    "load_requests": ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
    "l2_hit": ["lts__t_sector_hit_rate.pct"],
    "occupancy": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy": ["sm__maximum_warps_per_active_cycle_pct"],
    "registers": ["launch__registers_per_thread"],
}

# The stall breakdown: one metric per reason. The first family gives the share of the warps' cycles spent
# stalled for each reason; the second (older Nsight Compute) the cycles per issued instruction.
STALL_FAMILIES = [
    ("smsp__warp_issue_stalled_{}_per_warp_active.pct", "% of warp cycles"),
    ("smsp__average_warps_issue_stalled_{}_per_issue_active.ratio", "cycles per issued instruction"),
]
STALL_REASONS = ("long_scoreboard", "lg_throttle", "short_scoreboard", "mio_throttle", "barrier", "membar",
                 "wait", "not_selected", "selected", "math_pipe_throttle", "no_instruction", "branch_resolving",
                 "dispatch_stall", "drain", "imc_miss", "tex_throttle", "sleeping", "misc")

STALLS = {
    "long_scoreboard": "waiting for a load from global (or local) memory whose value the next instruction needs",
    "lg_throttle": "waiting for room in the queue of global/local memory instructions: too many in flight",
    "short_scoreboard": "waiting for shared memory (or a shuffle, or a special function) to deliver a value",
    "mio_throttle": "waiting for room in the queue of shared-memory, shuffle and special-function instructions",
    "barrier": "waiting at a block barrier (__syncthreads) for the block's other warps",
    "membar": "waiting at a memory fence",
    "wait": "a fixed, compiler-scheduled wait for a short-latency result",
    "not_selected": "ready to issue, but the scheduler picked another warp",
    "selected": "issuing an instruction (not a stall)",
    "math_pipe_throttle": "waiting for a busy arithmetic pipe",
    "no_instruction": "waiting for instructions to be fetched (an instruction-cache miss, or after a jump)",
    "branch_resolving": "waiting for a branch's target to be computed",
    "dispatch_stall": "its instruction held back by the dispatcher",
    "drain": "exiting: waiting for its last stores to leave",
    "imc_miss": "waiting for a constant missing from the constant cache",
    "tex_throttle": "waiting for room in the texture unit's queue",
    "sleeping": "asleep: all its threads blocked, yielded or in nanosleep",
    "misc": "other reasons",
}

COLUMNS = [  # (heading, row key, format)
    ("stage", "stage", "{}"), ("kernel", "kernel", "{}"), ("µs", "duration_us", "{:,.1f}"),
    ("DRAM % of peak", "dram_pct", "{:.1f}"), ("DRAM GB/s", "dram_GBps", "{:,.0f}"),
    ("MB read", "dram_read_MB", "{:,.1f}"), ("MB written", "dram_write_MB", "{:,.1f}"),
    ("load requests", "load_requests", "{:,.0f}"), ("sectors/request", "sectors_per_request", "{:.2f}"),
    ("L2 hit %", "l2_hit_pct", "{:.1f}"), ("occupancy %", "occupancy_pct", "{:.1f}"),
    ("limit %", "theoretical_occupancy_pct", "{:.0f}"), ("registers", "registers", "{:.0f}"),
]
COLUMN_NOTES = ("MB read, MB written: DRAM traffic. Load requests: warp-wide global load instructions at L1; "
                "sectors/request: 32-byte sectors each moved. Occupancy: warp slots filled on average (achieved) "
                "and at most (limit).")


# ------------------------------------------------------------------------------------------------------ errors

class ProfileUnavailable(RuntimeError):
    """No profile can be taken here; the message says why and what to do. In a notebook it shows as the
    message alone, not as a traceback."""

    def _render_traceback_(self):             # IPython shows this instead of the traceback
        return [f"{type(self).__name__}: {self}"]


class NcuMissing(ProfileUnavailable):
    pass


class NcuForbidden(ProfileUnavailable):
    pass


PLACES = ["/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"]


def find_ncu() -> str | None:
    """CUDABOOK_NCU, else ncu on PATH, else the newest of the usual install places; None if none exists."""
    named = os.environ.get("CUDABOOK_NCU")
    if named:
        return named if os.path.isfile(named) and os.access(named, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in PLACES:
        hits = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
        if hits:
            return hits[-1]
    return None


def require_ncu() -> str:
    ncu = find_ncu()
    if ncu:
        return ncu
    named = os.environ.get("CUDABOOK_NCU")
    if named:
        raise NcuMissing(f"CUDABOOK_NCU names {named}, which is not an executable file. Point it at Nsight "
                         f"Compute's command-line profiler, e.g. /usr/local/cuda/bin/ncu.")
    raise NcuMissing(
        "Nsight Compute's command-line profiler, ncu, is not on PATH, nor in its usual places ("
        + ", ".join(PLACES) + "). It comes with the CUDA toolkit (in its bin/ folder) and with Nsight Compute "
        "on its own. If it is elsewhere, name it: CUDABOOK_NCU=/path/to/ncu in the shell that starts Jupyter, "
        "or os.environ['CUDABOOK_NCU'] = '/path/to/ncu' in the notebook.")


PERMISSION_HELP = (
    "ncu started, but the NVIDIA driver refused it the GPU's performance counters (ERR_NVGPUCTRPERM). By "
    "default only administrators may read them. Either run as root (sudo, or a container started as root), or "
    "have an administrator allow every user: put the line `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
    "in a file in /etc/modprobe.d/ and reload the nvidia kernel module (or reboot). In a container the host's "
    "driver decides. NVIDIA's page: https://developer.nvidia.com/ERR_NVGPUCTRPERM")


def _diagnose(output: str, returncode: int) -> None:
    """Raise the error that explains a failed ncu run, or return if the output holds no known failure."""
    if "ERR_NVGPUCTRPERM" in output:
        raise NcuForbidden(PERMISSION_HELP)
    if "Failed to initialize the profiler" in output or "LibraryNotLoaded" in output:
        raise ProfileUnavailable(
            "ncu could not start its profiler on this machine (" + _first_error(output) + "). Some containers "
            "and sandboxes (gVisor, for one) do not give access to the GPU's counters at all; the recorded "
            "profiles in results/profiles/ still show what they measure.")


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if "==ERROR==" in line:
            return line.split("==ERROR==", 1)[1].strip()
    return "no error message"


# ---------------------------------------------------------------------------------------------------- running

def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+([0-9][\w.]*)", out)
    return m.group(1) if m else None


_QUERIED: dict = {}


def available_metrics(ncu: str) -> set | None:
    """The base names of the metrics this GPU offers (`ncu --query-metrics`), or None if ncu cannot say."""
    if ncu not in _QUERIED:
        try:
            done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
            names = set(re.findall(r"^\s*([a-z][a-z0-9]*__[a-z0-9_]+)\b", done.stdout, re.M))
            _QUERIED[ncu] = names if done.returncode == 0 and names else None
        except (OSError, subprocess.SubprocessError):
            _QUERIED[ncu] = None
    return _QUERIED[ncu]


def _base(metric: str) -> str:
    return metric.split(".", 1)[0]


def metric_names(available: set | None = None) -> list[str]:
    """The metrics to ask for: for each quantity the first name this GPU offers (the first name if unknown),
    and the stall reasons of the first stall family it offers."""
    names = []
    for candidates in METRICS.values():
        known = [c for c in candidates if available is None or _base(c) in available]
        names.append((known or candidates)[0])
    for family, _ in STALL_FAMILIES:
        pattern = re.compile("^" + re.escape(_base(family)).replace(r"\{\}", r"([a-z_]+?)") + "$")
        reasons = sorted(m.group(1) for m in map(pattern.match, available or ()) if m)
        if reasons:
            return names + [family.format(r) for r in reasons]
    return names + [STALL_FAMILIES[0][0].format(r) for r in STALL_REASONS]   # unknown: ask, drop what fails


# Options that help but that an ncu may not know: without them the numbers are still right (auto-scaled units
# are converted; ncu's default clock control locks the base clock, so times are longer than the ladder's).
OPTIONAL = {"--print-units": "base", "--clock-control": "none"}


def _command(ncu, metrics, track, stage, info, size=None, params=None, options=None) -> list[str]:
    options = OPTIONAL if options is None else options
    cmd = [ncu, "--csv", "--profile-from-start", "off", *[x for kv in options.items() for x in kv],
           "--metrics", ",".join(metrics), *shlex.split(os.environ.get("CUDABOOK_NCU_ARGS", "")),
           sys.executable, "-m", "cudabook.profile", "--run", track, stage, "--info", str(info)]
    if size is not None:
        cmd += ["--size", json.dumps(size)]
    if params:
        cmd += ["--params", json.dumps(params)]
    return cmd


def _child_env():
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + paths)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run(cmd, timeout, what) -> subprocess.CompletedProcess:
    """Run ncu in a process group of its own; a timeout, an interrupt or SIGTERM ends ncu and the program it
    profiles together, never leaving either running."""
    import signal
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(),
                                cwd=ROOT, start_new_session=True)
    except OSError as e:
        raise NcuMissing(f"could not start {cmd[0]}: {e}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as e:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise ProfileUnavailable(f"ncu did not finish profiling {what} within {timeout} s") from None
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def collect(ncu, track, stage, *, size=None, params=None, timeout=600) -> dict:
    """Run ncu on the driver for one stage. Returns {"kernels": [...], "info": {...}, "metrics": [...asked],
    "missing": [...names this ncu does not know], "ncu_args": [...]}; raises ProfileUnavailable saying why."""
    metrics = metric_names(available_metrics(ncu))
    missing, options = [], dict(OPTIONAL)
    with tempfile.TemporaryDirectory(prefix="cudabook-profile-") as tmp:
        info_path = pathlib.Path(tmp) / "info.json"
        for _ in range(8):           # a metric or an option this ncu does not know: drop it and try again
            info_path.unlink(missing_ok=True)
            cmd = _command(ncu, metrics, track, stage, info_path, size, params, options)
            done = _run(cmd, timeout, f"{track} {stage}")
            output = done.stdout + "\n" + done.stderr
            _diagnose(output, done.returncode)
            unknown = re.search(r"Failed to find metric\s+(?:regex:)?\^?([a-z][a-z0-9]*__[a-z0-9_]+)", output)
            drop = [m for m in metrics if unknown and _base(m) == unknown.group(1)]
            if drop:
                missing += drop
                metrics = [m for m in metrics if m not in drop]
                continue
            option = re.search(r"(?:unrecogni[sz]ed|unknown) option[^\n]*?(--[a-z-]+)", output, re.I)
            if option and option.group(1) in options:
                options.pop(option.group(1))
                continue
            break
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
    if info.get("error"):
        raise ProfileUnavailable(f"{track} {stage}: {info['error']}")
    kernels = parse_csv(done.stdout)
    if not kernels:
        tail = "\n".join(line for line in output.splitlines() if line.strip())[-1500:]
        raise ProfileUnavailable(f"ncu profiled no kernel of {track} {stage} (exit status {done.returncode}). "
                                 f"Its last words:\n{tail}")
    return {"kernels": kernels, "info": info, "metrics": metrics, "missing": missing,
            "ncu_args": [a for a in cmd[1:cmd.index(sys.executable)]]}


# ---------------------------------------------------------------------------------------------------- parsing

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
    row["l2_hit_pct"] = get("l2_hit")
    row["occupancy_pct"] = get("occupancy")
    row["theoretical_occupancy_pct"] = get("theoretical_occupancy")
    row["registers"] = get("registers")
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


# ---------------------------------------------------------------------------------------------------- a profile

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
        return "\n".join(lines + [COLUMN_NOTES])

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self):
        import html
        heads, body = self._cells()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in b) + "</tr>" for b in body)
        return (f"<table><caption style='text-align:left'>{html.escape(self.caption())}</caption>"
                f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
                f"<p style='font-size:smaller'>{html.escape(COLUMN_NOTES)}</p>")


def _stage_name(t, stage) -> str:
    module = t.stage(stage)
    return next(s for s in t.STAGES if t.stage(s) is module)


def _gpu_name():
    from . import device
    g = device.gpu()
    return g.name if g else None


def profile(track, stage, size=None, **params) -> Profile:
    """Profile one stage now with Nsight Compute: a GPU and ncu are needed (else ProfileUnavailable, saying
    why). `size`: the problem's size as the track's benchmark names it (dict(B=..., S=..., T=..., D=...) for
    resampling); by default the track's first benchmark workload. `params`: the stage's launch parameters."""
    from . import SIMULATOR
    from . import track as tracks
    t = tracks.get(track)
    name = _stage_name(t, stage)
    if SIMULATOR:
        from . import device
        raise ProfileUnavailable(f"profiling needs a GPU; this machine has none ({device.why_no_gpu()})")
    why = t.unavailable(name)
    if why:
        raise ProfileUnavailable(why)
    ncu = require_ncu()
    got = collect(ncu, t.NAME, name, size=size, params=params)
    version = ncu_version(ncu)
    rows = [derive(k, name) for k in got["kernels"]]
    info = got["info"]
    stages = {name: {"workload": info.get("workload"), "size": info.get("size"), "min_bytes": info.get("min_bytes"),
                     "params": params}}
    gpu = _gpu_name()
    p = Profile(rows, track=t.NAME, gpu=gpu, ncu=version, stages=stages,
                label=f"measured now on {gpu} with ncu {version or '?'}",
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    return p


# ------------------------------------------------------------------------------------------------------ records

def record_path(gpu: str, track: str, folder=None) -> pathlib.Path:
    from .results import slug
    return pathlib.Path(folder or PROFILES) / f"{slug(gpu)}_{track}.json"


def _driver_release() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def stage_entry(got: dict, params=None) -> dict:
    """What a record keeps of one stage's profile: the workload, every counter read per kernel, and the
    pedigree of the code that ran."""
    from .results import _pedigree
    info, ped = got["info"], _pedigree()
    return {"workload": info.get("workload"), "size": info.get("size"), "min_bytes": info.get("min_bytes"),
            "params": params or {}, "ncu_args": got.get("ncu_args", []), "missing_metrics": got.get("missing", []),
            "commit": ped["commit"], "dirty": ped["dirty"], "source_digest": ped["source_digest"],
            "date": ped["date"],
            "kernels": [{k: v for k, v in kern.items() if k in ("function", "kernel", "block", "grid", "metrics",
                                                                  "units")} for kern in got["kernels"]]}


def new_record(track: str, *, ncu_version=None, machine=None) -> dict:
    from .results import _pedigree
    ped = _pedigree()
    machine = machine or ped["machine"]
    return {"schema": SCHEMA, "kind": "ncu profile", "track": track, "gpu": machine["gpu"], "machine": machine,
            "driver": _driver_release(), "cuda_driver": machine.get("driver_version"), "ncu": ncu_version,
            "commit": ped["commit"], "dirty": ped["dirty"], "source_digest": ped["source_digest"],
            "date": ped["date"], "stages": {}}


def validate_record(record, where="record") -> dict:
    """Raise RecordError naming the file and the missing or malformed field."""
    def need(obj, key, kind, at=""):
        return require_field(where, obj, key, kind, at)

    if need(record, "kind", str) != "ncu profile":
        raise RecordError(f"{where}: kind is {record['kind']!r}, not 'ncu profile'")
    need(record, "schema", int)
    need(record, "gpu", str)
    need(record, "track", str)
    need(record, "date", str)
    for sname, s in need(record, "stages", dict).items():
        at = f"stages.{sname}."
        if "skipped" in s or "error" in s:
            continue
        for i, k in enumerate(need(s, "kernels", list, at)):
            need(k, "kernel", str, f"{at}kernels[{i}].")
            for name, value in need(k, "metrics", dict, f"{at}kernels[{i}].").items():
                if value is not None and not isinstance(value, (int, float)):
                    raise RecordError(f"{where}: {at}kernels[{i}].metrics.{name} should be a number, got {value!r}")
    return record


def save_record(record, folder=None) -> pathlib.Path:
    """Write results/profiles/<gpu>_<track>.json. Stages already in that file and not in this record stay,
    each with its own commit and date, and so does a stage's profile where this record has only an error."""
    validate_record(record)
    path = record_path(record["gpu"], record["track"], folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        old, stages = load_record(path)["stages"], dict(record["stages"])
        for k, v in stages.items():      # a failed try does not replace a profile measured before
            if "error" in v and "kernels" in old.get(k, {}):
                stages[k] = old[k]
        record = dict(record, stages={**{k: v for k, v in old.items() if k not in stages}, **stages})
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load_record(path) -> dict:
    return read_record(path, validate_record)


def load_records(track, folder=None) -> list[dict]:
    folder = pathlib.Path(folder or PROFILES)
    return [r for r in (load_record(p) for p in sorted(folder.glob(f"*_{track}.json"))) if r["track"] == track]


def from_record(record, stages) -> Profile:
    """The profile of `stages` as a record holds it (stages it lacks are left out)."""
    rows, info = [], {}
    for name in stages:
        s = record["stages"].get(name)
        if not s or "kernels" not in s:
            continue
        rows += [derive(k, name) for k in s["kernels"]]
        info[name] = {k: s.get(k) for k in ("workload", "size", "min_bytes", "params", "date", "commit")}
    dates = sorted({(s.get("date") or "")[:10] for s in info.values()} - {""})
    when = ", ".join(dates) or (record.get("date") or "?")[:10]
    return Profile(rows, track=record["track"], gpu=record["gpu"], ncu=record.get("ncu"), stages=info,
                   label=f"recorded on {record['gpu']}, {when} (ncu {record.get('ncu') or '?'})",
                   date=when)


def recorded(track, *stages, folder=None, gpu=None) -> Profile | None:
    """The recorded profile of `stages` (all recorded ones if none named): from this GPU's record if there is
    one (or `gpu`'s), else from the most recent record that has them; None if nothing is recorded."""
    from . import track as tracks
    t = tracks.get(track)
    names = [_stage_name(t, s) for s in stages] or list(t.STAGES)
    records = [r for r in load_records(t.NAME, folder) if any(n in r["stages"] and "kernels" in r["stages"][n]
                                                               for n in names)]
    if not records:
        return None
    want = gpu or _gpu_name()
    records.sort(key=lambda r: (r["gpu"] == want, sum(n in r["stages"] for n in names), r.get("date") or ""))
    return from_record(records[-1], names)


def record(track, stages=None, *, size=None, params=None, folder=None, progress=print) -> pathlib.Path:
    """Profile `stages` (all of the track's by default) on this GPU and save them to
    results/profiles/<gpu>_<track>.json, after each stage (a run cut short keeps what it measured). A stage this
    machine cannot run is recorded as skipped, saying why; one that fails, with its error."""
    from . import SIMULATOR
    from . import track as tracks
    t = tracks.get(track)
    if SIMULATOR:
        raise ProfileUnavailable("recording profiles needs a GPU; this machine runs the simulator")
    ncu = require_ncu()
    version = ncu_version(ncu)
    rec = new_record(t.NAME, ncu_version=version)
    params = params or {}
    path = None
    for s in stages or t.STAGES:
        name = _stage_name(t, s)
        why = t.unavailable(name)
        if why:
            rec["stages"][name] = {"skipped": why}
            progress(f"{name}: skipped: {why}")
        else:
            try:
                got = collect(ncu, t.NAME, name, size=size, params=params.get(name))
                rec["stages"][name] = stage_entry(got, params.get(name))
                progress(repr(Profile([derive(k, name) for k in got["kernels"]], label=f"{name} · ncu {version}")))
                if got["missing"]:
                    progress(f"  (this ncu does not know: {', '.join(got['missing'])})")
            except (NcuMissing, NcuForbidden):
                raise
            except ProfileUnavailable as e:
                rec["stages"][name] = {"error": str(e)[:500]}
                progress(f"{name}: ERROR {e}")
        path = save_record(rec, folder)
    return path or save_record(rec, folder)


# --------------------------------------------------------------------------------------------------------- show

def _display(p):
    try:
        from IPython import get_ipython
        from IPython.display import display
        if get_ipython() is not None:
            display(p)
            return
    except ImportError:
        pass
    print(repr(p))


def show(track, *stages, size=None, live=None, folder=None, **params) -> Profile | None:
    """Show the profile of one or more stages and return it (None if there is none to show).

    On a GPU with ncu it profiles the stages now; otherwise (no GPU, no ncu, no permission: it says which) it
    shows the profile recorded in results/profiles/, labelled with the card and the date it was measured.
    live=False always shows the record; CUDABOOK_PROFILE=recorded does the same for every call."""
    from . import SIMULATOR
    from . import track as tracks
    t = tracks.get(track)
    names = [_stage_name(t, s) for s in stages] or list(t.STAGES)
    if live is None:
        live = not SIMULATOR and os.environ.get("CUDABOOK_PROFILE", "live") != "recorded"
    if live:
        try:
            parts = [profile(t.NAME, n, size, **params) for n in names]
            p = Profile([r for part in parts for r in part], track=t.NAME, gpu=parts[0].gpu, ncu=parts[0].ncu,
                        label=parts[0].label, stages={k: v for part in parts for k, v in part.stages.items()},
                        date=parts[0].date)
            _display(p)
            return p
        except ProfileUnavailable as e:
            print(f"No live profile: {e}\n")
    p = recorded(t.NAME, *names, folder=folder)
    if p is None or not p:
        print(f"No profile of {t.NAME} {', '.join(names)} recorded yet: profiles are recorded on a GPU with "
              f"`python -m cudabook.profile --record {t.NAME}` (into results/profiles/).")
        return None
    _display(p)
    return p


# ------------------------------------------------------------------------------------- the driver ncu profiles

def _drive(track, stage, info_path, size=None, params=None) -> int:
    """Inside ncu: upload the problem, launch once (compile, warm up), then once between cuProfilerStart and
    cuProfilerStop. Writes what it ran (workload, size, minimum traffic) or why it could not to info_path."""
    info = {}
    try:
        from . import SIMULATOR          # (the package, imported first, chose GPU or simulator)
        from . import track as tracks
        if SIMULATOR:
            raise ProfileUnavailable("the profiled program found no GPU")
        from numba import cuda
        t = tracks.get(track)
        why = t.unavailable(stage)
        if why:
            raise ProfileUnavailable(why)
        size = size if size is not None else dict(t.bench.WORKLOADS[0])
        args, problem = t.bench.prepare(dict(size))
        module = t.stage(stage)
        params = params or {}
        problem.poison()
        module.launch(problem, **params)
        cuda.synchronize()
        cuda.profile_start()
        module.launch(problem, **params)
        cuda.synchronize()
        cuda.profile_stop()
        info = {"workload": t.bench.workload_name(**size), "size": size,
                "min_bytes": getattr(problem, "min_bytes", None), "params": params}
        code = 0
    except Exception as e:  # reported through the info file, read by the parent
        info = {"error": f"{type(e).__name__}: {e}"}
        code = 1
    pathlib.Path(info_path).write_text(json.dumps(info, default=str))
    return code


def main(argv=None) -> int:
    """python -m cudabook.profile TRACK STAGE...             profile now and print the table
    python -m cudabook.profile --record TRACK [STAGE...]   profile and save results/profiles/<gpu>_<track>.json
    python -m cudabook.profile --show TRACK [STAGE...]     the recorded profile
    (--run TRACK STAGE --info PATH [--size JSON] [--params JSON] is the driver ncu runs.)"""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m cudabook.profile", description=main.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--info", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=json.loads, help="the problem's size as JSON, e.g. '{\"B\": 8, ...}'")
    ap.add_argument("--params", type=json.loads, help="the stage's launch parameters as JSON")
    ap.add_argument("track")
    ap.add_argument("stages", nargs="*")
    a = ap.parse_args(argv)
    if a.run:
        return _drive(a.track, a.stages[0], a.info, a.size, a.params)
    if argv is None:                   # from the shell: `timeout` sends SIGTERM; end ncu and its program too
        import signal

        def stop(signum, frame):
            raise SystemExit(128 + signum)
        signal.signal(signal.SIGTERM, stop)
    try:
        if a.record:
            from . import track as tracks
            t = tracks.get(a.track)
            params = {_stage_name(t, s): a.params for s in a.stages} if a.params else None
            path = record(a.track, a.stages or None, size=a.size, params=params)
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        elif a.show:
            p = recorded(a.track, *a.stages)
            print(repr(p) if p else f"No profile of {a.track} recorded yet.")
        else:
            for s in a.stages:
                print(repr(profile(a.track, s, a.size, **(a.params or {}))), "\n")
    except ProfileUnavailable as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
