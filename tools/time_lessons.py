"""Time every lesson and every lab's solution as a learner runs them: a fresh kernel per notebook, top to bottom.

    python tools/time_lessons.py --out results/timings     run them all on this machine, write
                                                           results/timings/<gpu or cpu>.json, refresh GUIDE.md
    python tools/time_lessons.py notebooks/gemm            only these (folders or .ipynb files), merged into
                                                           the machine's record
    python tools/time_lessons.py --guide                   only rewrite GUIDE.md's generated parts from the records
    python tools/time_lessons.py --gpus 8                  a class's check on an 8-GPU node: the notebooks
                                                           spread over the GPUs, one at a time on each
    python tools/time_lessons.py --per-gpu 2 A B           A and B at once on one GPU (a pair sharing a card)

Each notebook runs in its own kernel through nbclient (as `make workbook` runs them), or, where no Jupyter kernel
can start, in its own Python process through tools/run_notebooks.py (--runner exec). The record keeps, per
notebook, the wall time (what a learner waits), the CPU time of its process, whether it ran to the end, and the
commit and date; and, for the machine, the GPU or CPU, the versions of what ran the kernels, and the load average
(other work on the machine makes wall times longer than they would be). The compiled-kernel caches start empty,
torch.compile's (inductor's and Triton's) too (--warm keeps them), so the times are those of a learner's first
pass. With CUDABOOK_CELL_SECONDS=N and the exec runner, each cell that took N seconds or more is printed as well,
and kept in the notebook's entry (slow_cells); the exec runner also keeps the longest any of its cells printed
nothing (longest_silence_s, quietest_cell).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TIMINGS = ROOT / "results" / "timings"
FOLDERS = ("notebooks", "solutions")         # the lessons, and the labs as their solutions run
os.environ.setdefault("MPLBACKEND", "Agg")


def notebooks_in(args: list[str], labs: bool = False) -> list[pathlib.Path]:
    """The notebooks named (files or folders, recursively), or every lesson and solution (and lab)."""
    if not args:
        args = list(FOLDERS) + (["labs"] if labs else [])
    paths = []
    for a in args:
        p = (ROOT / a) if not pathlib.Path(a).is_absolute() else pathlib.Path(a)
        paths += sorted(p.glob("*.ipynb")) + sorted(p.glob("*/*.ipynb")) if p.is_dir() else [p]
    return [p.resolve() for p in paths if ".ipynb_checkpoints" not in p.parts]


def cpu_name() -> str:
    import platform
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().split("\n"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine() -> dict:
    """What ran the notebooks: device.describe() (GPU or simulator, versions) and the CPU."""
    import importlib
    importlib.import_module("cudabook")                  # first: decides GPU or simulator before numba loads
    from cudabook import device
    info = device.describe()
    info.update(cpu=cpu_name(), cores=os.cpu_count())
    return info


def slug(info: dict) -> str:
    from cudabook import results
    return results.slug(info["gpu"]) if info["gpu"] != "simulator" else "cpu_" + results.slug(info["cpu"])


def kernel_runner() -> str:
    """nbclient where a Jupyter kernel can start here, else plain exec (tools/run_notebooks.py)."""
    import importlib.util
    if not (importlib.util.find_spec("ipykernel") and importlib.util.find_spec("nbclient")):
        return "exec"
    try:
        from jupyter_client.kernelspec import KernelSpecManager
        KernelSpecManager().get_kernel_spec("python3")
        return "nbclient"
    except Exception:
        return "exec"


def run_one(path: pathlib.Path, runner: str, timeout: int, gpu: int | None = None) -> dict:
    """Run one notebook and time it. gpu: the index of the GPU it may see (CUDA_VISIBLE_DEVICES of its process;
    the exec runner only), None for the machine's default."""
    before = os.times()
    start = time.perf_counter()
    notes = {}                  # the exec runner's notes: its slow cells, and the longest a cell printed nothing
    if runner == "nbclient":
        from cudabook.workbook import execute
        ok, _, err = execute(path, None, timeout)
    else:
        env = dict(os.environ, **({} if gpu is None else {"CUDA_VISIBLE_DEVICES": str(gpu)}))
        done = subprocess.run([sys.executable, str(ROOT / "tools" / "run_notebooks.py"), str(path)],
                              capture_output=True, text=True, env=env)
        ok, err = done.returncode == 0, "" if done.returncode == 0 else (done.stdout + done.stderr).strip()[-300:]
        slow_cells = [line for line in done.stdout.splitlines() if line.startswith("  cell ")]
        if slow_cells:      # CUDABOOK_CELL_SECONDS set: where the time went, printed and kept
            print("\n".join(slow_cells), flush=True)
            notes["slow_cells"] = [line.strip() for line in slow_cells]
        notes.update(silence(done.stdout))
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    entry = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "ok": ok, "error": err}
    entry.update(notes)
    # several notebooks at once: the children's CPU time of this process is theirs together, not this one's
    return entry if gpu is None else dict(entry, cpu_s=None, gpu_index=gpu)


def silence(stdout: str) -> dict:
    """run_notebooks.py's "longest silence" line as {longest_silence_s, quietest_cell}, or {}."""
    import re
    m = re.search(r"^  longest silence: ([0-9.]+) s in (.*)$", stdout, re.M)
    return {"longest_silence_s": float(m.group(1)), "quietest_cell": m.group(2)} if m else {}


def visible_gpus() -> int:
    """How many GPUs this process may use (0 without one)."""
    from cudabook import device
    if device.gpu() is None:
        return 0
    from cuda.bindings import driver
    driver.cuInit(0)
    err, n = driver.cuDeviceGetCount()
    return int(n) if err == driver.CUresult.CUDA_SUCCESS else 1


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def measure(paths, out: pathlib.Path, runner: str, timeout: int, progress=print, warm=False, gpus: int = 1,
            per_gpu: int = 1) -> pathlib.Path:
    """Run and time `paths`, merging them into out/<machine>.json. Unless `warm`, the compiled-kernel caches
    (CUDABOOK_CACHE) start empty, as on a learner's first pass: each notebook pays for the compiles that the
    notebooks before it in the run have not already done. gpus > 1 or per_gpu > 1 (the exec runner): the
    notebooks are handed out in order to gpus x per_gpu workers, worker w on GPU w % gpus, so per_gpu of them
    share a card at a time; the record keeps each notebook's GPU and the run's wall time."""
    import tempfile
    import threading

    from cudabook import results
    made = []                                # the empty caches made here, removed at the end
    if not warm:                             # torch.compile's caches too: a peer compiles as on a first pass
        for var in ("CUDABOOK_CACHE", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            os.environ[var] = tempfile.mkdtemp(prefix=var.lower() + "-")
            made.append(os.environ[var])
    info = machine()
    out.mkdir(parents=True, exist_ok=True)
    file = out / f"{slug(info)}.json"
    record = json.loads(file.read_text()) if file.exists() else {"notebooks": {}}
    commit, date = results._commit(), datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    loads = [load()]
    spread = gpus > 1 or per_gpu > 1
    if not spread and "gpus" in record:      # an earlier run spread over GPUs: its description stays its own
        record["spread_run"] = {**{k: record.pop(k) for k in ("gpus", "per_gpu", "run_wall_s") if k in record},
                                **{k: record.get(k) for k in ("commit", "date", "load_avg_1min")},
                                "cores": record.get("machine", {}).get("cores")}
    if spread and runner != "exec":
        raise SystemExit("--gpus / --per-gpu run each notebook in its own process: use --runner exec")
    where = info['gpu'] if info['gpu'] != 'simulator' else info['cpu']
    progress(f"timing {len(paths)} notebooks on {where}"
             + (f" x {gpus} GPUs, {per_gpu} at a time on each" if spread else "")
             + f" ({runner}); record: {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
    lock, queue, started = threading.Lock(), list(enumerate(paths, 1)), time.perf_counter()

    def worker(w):
        while True:
            with lock:
                if not queue:
                    return
                i, path = queue.pop(0)
            name = path.relative_to(ROOT).as_posix()
            if not spread:
                progress(f"[{i}/{len(paths)}] {name} ...", end=" ", flush=True)
            entry = run_one(path, runner, timeout, gpu=w % gpus if spread else None)
            with lock:
                loads.append(load())
                entry.update(commit=commit, date=date)
                record["notebooks"][name] = entry
                progress((f"[{i}/{len(paths)}] {name} on GPU {w % gpus}: " if spread else "")
                         + f"{'ok' if entry['ok'] else 'FAILED'} {entry['wall_s']:.0f} s"
                         + (f" (CPU {entry['cpu_s']:.0f} s)" if entry["cpu_s"] is not None else "")
                         + (f"  {entry['error']}" if entry["error"] else ""), flush=True)
                record.update(machine=info, runner=runner, commit=commit, dirty=results._dirty(), date=date,
                              cache="warm" if warm else "empty at the start, torch.compile's too",
                              load_avg_1min=[x[0] for x in loads if x])
                if spread:
                    record.update(gpus=gpus, per_gpu=per_gpu, run_wall_s=round(time.perf_counter() - started, 1))
                record["notebooks"] = dict(sorted(record["notebooks"].items()))
                file.write_text(json.dumps(record, indent=1) + "\n")  # after each: a long run can be cut short

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(gpus * per_gpu if spread else 1)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        import shutil
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
    return file


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="notebooks or folders (default: notebooks/ and solutions/)")
    ap.add_argument("--out", type=pathlib.Path, default=TIMINGS, help="folder of the records (results/timings)")
    ap.add_argument("--labs", action="store_true", help="also time the labs as handed out (their TODOs)")
    ap.add_argument("--runner", choices=("auto", "nbclient", "exec"), default="auto")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a cell may take")
    ap.add_argument("--warm", action="store_true", help="keep the compiled-kernel caches as they are")
    ap.add_argument("--guide", action="store_true", help="only regenerate GUIDE.md from the records")
    ap.add_argument("--gpus", type=int, default=1, help="spread the notebooks over this many GPUs (0: all)")
    ap.add_argument("--per-gpu", type=int, default=1, help="notebooks at once on each GPU")
    args = ap.parse_args(argv)

    from tools import guide
    if args.guide:
        print("GUIDE.md updated" if guide.update(timings=args.out) else "GUIDE.md already up to date")
        return 0
    gpus = args.gpus if args.gpus > 0 else max(1, visible_gpus())
    runner = ("exec" if gpus > 1 or args.per_gpu > 1 else kernel_runner()) if args.runner == "auto" else args.runner
    file = measure(notebooks_in(args.paths, args.labs), args.out.resolve(), runner, args.timeout, warm=args.warm,
                   gpus=gpus, per_gpu=args.per_gpu)
    record = json.loads(file.read_text())
    failed = [k for k, v in record["notebooks"].items() if not v["ok"]]
    print(f"wrote {file}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if args.out.resolve() == TIMINGS.resolve():
        print("GUIDE.md updated" if guide.update() else "GUIDE.md already up to date")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
