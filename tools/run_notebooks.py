"""Execute notebooks without Jupyter: every code cell in order, in one namespace per notebook, matplotlib on Agg.

For machines that have the workbook's dependencies but no Jupyter kernel (the GPU machine): the lessons use no
IPython magics, so plain exec runs them as nbval would. Prints each notebook's result and the failing cell's
traceback; exits 1 if any failed. With CUDABOOK_CELL_SECONDS=N set, also prints each cell that took N seconds
or more (its number and first line), to find what makes a lesson slow. For each notebook it prints the longest
stretch of any cell with nothing printed ("longest silence"): a cell that works for long should say so as it goes.

    python tools/run_notebooks.py notebooks/gemm labs/gemm solutions/gemm
"""
import json
import os
import pathlib
import sys
import time
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")


class Watched:
    """A stream that passes everything on and notes when something visible was written: a cell's silences are
    the gaps between those moments (and from its start, and to its end)."""

    def __init__(self, stream, times):
        self.stream, self.times = stream, times

    def write(self, text):
        if text.strip():
            self.times.append(time.time())
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def longest_silence(started: float, writes: list, ended: float) -> float:
    """The longest stretch of a cell, in seconds, with nothing printed."""
    moments = [started, *sorted(writes), ended]
    return max(b - a for a, b in zip(moments, moments[1:]))


def run(path: pathlib.Path, slow: float = float("inf")) -> bool:
    """Run the notebook's code cells in order; print the cells that took `slow` seconds or more, and, at the end,
    the longest silence of any cell (how long a learner watched a cell that printed nothing)."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    namespace = {"__name__": "__main__"}
    cwd = os.getcwd()
    os.chdir(path.parent)
    t = time.time()
    quietest = (0.0, "")
    try:
        for i, cell in enumerate(cells):
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            first = next((line for line in source.splitlines() if line.strip() and not line.startswith("#")), "")
            writes, streams = [], (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = Watched(sys.stdout, writes), Watched(sys.stderr, writes)
            started = time.time()
            try:
                exec(compile(source, f"{path}:cell {i}", "exec"), namespace)
            except Exception:
                sys.stdout, sys.stderr = streams
                print(f"FAILED {path} (cell {i}, {time.time() - t:.0f} s)\n{traceback.format_exc()[-3000:]}", flush=True)
                return False
            finally:
                sys.stdout, sys.stderr = streams
            ended = time.time()
            silence = longest_silence(started, writes, ended)
            if silence > quietest[0]:
                quietest = (silence, f"cell {i}: {first[:90]}")
            if ended - started >= slow:
                print(f"  cell {i}: {ended - started:.0f} s  {first[:90]}", flush=True)
    finally:
        os.chdir(cwd)
        import matplotlib.pyplot as plt
        plt.close("all")
    print(f"  longest silence: {quietest[0]:.1f} s in {quietest[1]}", flush=True)
    print(f"ok     {path} ({time.time() - t:.0f} s)", flush=True)
    return True


def cell_seconds() -> float:
    """CUDABOOK_CELL_SECONDS as a number of seconds (unset or empty: never print a cell)."""
    text = os.environ.get("CUDABOOK_CELL_SECONDS") or "inf"
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"CUDABOOK_CELL_SECONDS must be a number of seconds (print the cells that take at least "
                         f"that long), got {text!r}") from None


def main(args):
    slow = cell_seconds()
    paths = []
    for a in args:
        p = pathlib.Path(a)
        paths += sorted(p.rglob("*.ipynb")) if p.is_dir() else [p]
    failed = [p for p in paths if not run(p.resolve(), slow)]
    print(f"{len(paths) - len(failed)} of {len(paths)} notebooks ran" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
