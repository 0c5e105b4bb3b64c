"""Run the whole workbook headlessly: every lesson this machine can run, then the results report.

    python -m cudabook.workbook            lessons + solutions, executed into build/notebooks/
    python -m cudabook.workbook --labs     also the labs (they run, and their graders say what to write)
    python -m cudabook.workbook --jobs 3   three notebooks at a time (the default without a GPU: one more than
                                           the cores, up to 4: a notebook waits on its compilers and children
                                           part of the time; on 2 cores 2 and 3 at a time took 229 and 237 s,
                                           within the noise; with a GPU: one at a time)

With a GPU the lessons run at full size and the benchmark writes build/results/<gpu>.json; with none they run
in the simulator at small sizes, and the report shows the records in results/ instead.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"


def kernel_config():
    """How the headless kernels talk to us: over CurveZMQ-encrypted TCP (the kernelspec declares it), or over
    local IPC sockets where pyzmq lacks CurveZMQ. Plain TCP would make every kernel print ipykernel's warning
    that its traffic is unencrypted, once per notebook."""
    import zmq
    from traitlets.config import Config
    config = Config()
    if zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    else:
        config.KernelManager.transport = "ipc"
    return config


def execute(path: pathlib.Path, out_dir: pathlib.Path | None, timeout: int) -> tuple[bool, float, str]:
    """Run a notebook in a fresh kernel; write the executed copy into out_dir (unless None).
    Returns (ok, wall seconds, the error's last line)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    ok, err = True, ""
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", config=kernel_config(),
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as e:
        ok, err = False, str(e).strip().splitlines()[-1][:300]
    except Exception as e:                       # a cell past the timeout, a kernel that died
        ok, err = False, f"{type(e).__name__}: {str(e).strip()[:300]}"
    seconds = time.time() - start
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out_dir / path.name)
    return ok, seconds, err


def longest_first(paths, simulator: bool) -> list:
    """`paths` with the notebooks that took longest on this kind of machine first (the records in
    results/timings: CPU ones for the simulator, else GPU ones), those never timed before them all: with several
    at a time, a long notebook started last would run alone at the end."""
    import json
    recorded: dict[str, float] = {}
    for file in sorted((ROOT / "results" / "timings").glob("*.json")):
        try:
            record = json.loads(file.read_text())
            if (record["machine"]["gpu"] == "simulator") != simulator:
                continue
            for name, entry in record["notebooks"].items():
                recorded[name] = max(recorded.get(name, 0.0), float(entry["wall_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    key = lambda p: -recorded.get(p.relative_to(ROOT).as_posix(), float("inf"))
    return sorted(paths, key=key)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labs", action="store_true", help="also execute the labs")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a cell may take")
    ap.add_argument("--no-bench", action="store_true", help="skip the benchmark on a GPU")
    ap.add_argument("--jobs", type=int, default=0, help="notebooks at a time (0: the machine's default)")
    args = ap.parse_args(argv)

    import cudabook
    from cudabook import results
    print(f"cudabook workbook on: {cudabook.where()}", flush=True)
    folders = ["notebooks", "solutions"] + (["labs"] if args.labs else [])
    paths = [p for f in folders for p in sorted((ROOT / f).glob("*.ipynb")) + sorted((ROOT / f).glob("*/*.ipynb"))]
    failures = 0
    jobs = args.jobs or (min((os.cpu_count() or 1) + 1, 4) if cudabook.SIMULATOR else 1)

    def said(ok, seconds, err):
        return f"{'ok' if ok else 'FAILED'} ({seconds:.0f} s){'  ' + err if err else ''}"

    started = time.perf_counter()
    if jobs == 1:
        for i, path in enumerate(paths, 1):
            print(f"[{i}/{len(paths)}] {path.relative_to(ROOT)} ...", end=" ", flush=True)
            ok, seconds, err = execute(path, BUILD / path.parent.relative_to(ROOT), args.timeout)
            failures += not ok
            print(said(ok, seconds, err), flush=True)
    else:                        # each notebook in its own kernel process anyway: `jobs` of them at a time
        import concurrent.futures
        print(f"{len(paths)} notebooks, {jobs} at a time, the longest first", flush=True)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            futures = {pool.submit(execute, path, BUILD / path.parent.relative_to(ROOT), args.timeout): path
                       for path in longest_first(paths, cudabook.SIMULATOR)}
            for i, done in enumerate(concurrent.futures.as_completed(futures), 1):
                ok, seconds, err = done.result()
                failures += not ok
                print(f"[{i}/{len(paths)}] {futures[done].relative_to(ROOT)} {said(ok, seconds, err)}", flush=True)
    print(f"{len(paths)} notebooks in {time.perf_counter() - started:.0f} s")
    print(f"executed notebooks are in {(BUILD / 'notebooks').relative_to(ROOT)}/, "
          f"{(BUILD / 'solutions').relative_to(ROOT)}/")

    report = BUILD / "results"
    report.mkdir(parents=True, exist_ok=True)
    if cudabook.SIMULATOR or args.no_bench:
        records = results.load_all()
        print("\nNo GPU: the ladder as recorded in results/ (measured on real GPUs):\n" if cudabook.SIMULATOR else "")
    else:
        print("\nBenchmark (same process, same data, yardsticks measured alongside):", flush=True)
        from cudabook import track as tracks
        for name in tracks.TRACKS:
            results.save(results.run_track(name), report)
        records = results.load_all(report)
    text = "\n\n".join(results.table(r, k) for r in records for k in r["workloads"]) or "no records"
    for r in records:
        results.save_plot(r, report)
        if cudabook.SIMULATOR:
            shutil.copy(ROOT / "results" / f"{results.slug(r['gpu'])}.json", report)
    (report / "ladder.md").write_text(text + "\n")
    print(text)
    print(f"\nreport: {(report / 'ladder.md').relative_to(ROOT)} and the plots beside it")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
