"""Nsight Compute's command-line profiler: where it is, why it cannot run here (the errors that say so), and
running it on the driver for one stage (`collect`)."""
from __future__ import annotations

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

from .metrics import _base, metric_names
from .parsing import parse_csv


ROOT = pathlib.Path(__file__).resolve().parents[2]


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


# Options that help but that an ncu may not know: without them the numbers are still right (auto-scaled units
# are converted; ncu's default clock control locks the base clock, so times are longer than the ladder's).
OPTIONAL = {"--print-units": "base", "--clock-control": "none"}


def _command(ncu, metrics, track, stage, info, size=None, params=None, options=None, edit=None,
             side="edited") -> list[str]:
    options = OPTIONAL if options is None else options
    cmd = [ncu, "--csv", "--profile-from-start", "off", *[x for kv in options.items() for x in kv],
           "--metrics", ",".join(metrics), *shlex.split(os.environ.get("CUDABOOK_NCU_ARGS", "")),
           sys.executable, "-m", "cudabook.profile", "--run", track, stage, "--info", str(info)]
    if size is not None:
        cmd += ["--size", json.dumps(size)]
    if params:
        cmd += ["--params", json.dumps(params)]
    if edit:
        cmd += ["--edit", str(edit), "--side", side]
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


def collect(ncu, track, stage, *, size=None, params=None, edit=None, side="edited", timeout=600) -> dict:
    """Run ncu on the driver for one stage. Returns {"kernels": [...], "info": {...}, "metrics": [...asked],
    "missing": [...names this ncu does not know], "ncu_args": [...]}; raises ProfileUnavailable saying why."""
    metrics = metric_names(available_metrics(ncu))
    missing, options = [], dict(OPTIONAL)
    with tempfile.TemporaryDirectory(prefix="cudabook-profile-") as tmp:
        info_path = pathlib.Path(tmp) / "info.json"
        for _ in range(8):           # a metric or an option this ncu does not know: drop it and try again
            info_path.unlink(missing_ok=True)
            cmd = _command(ncu, metrics, track, stage, info_path, size, params, options, edit, side)
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
