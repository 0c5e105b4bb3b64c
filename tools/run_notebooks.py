"""Execute notebooks without Jupyter: every code cell in order, in one namespace per notebook, matplotlib on Agg.

For machines that have the workbook's dependencies but no Jupyter kernel (the GPU machine): the lessons use no
IPython magics, so plain exec runs them as nbval would. Prints each notebook's result and the failing cell's
traceback; exits 1 if any failed. With CUDABOOK_CELL_SECONDS=N set, also prints each cell that took N seconds
or more (its number and first line), to find what makes a lesson slow.

    python tools/run_notebooks.py notebooks/gemm labs/gemm solutions/gemm
"""
import json
import os
import pathlib
import sys
import time
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")


def run(path: pathlib.Path, slow: float = float("inf")) -> bool:
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    namespace = {"__name__": "__main__"}
    cwd = os.getcwd()
    os.chdir(path.parent)
    t = time.time()
    try:
        for i, cell in enumerate(cells):
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            started = time.time()
            try:
                exec(compile(source, f"{path}:cell {i}", "exec"), namespace)
            except Exception:
                print(f"FAILED {path} (cell {i}, {time.time() - t:.0f} s)\n{traceback.format_exc()[-3000:]}", flush=True)
                return False
            took = time.time() - started
            if took >= slow:
                first = next((line for line in source.splitlines() if line.strip() and not line.startswith("#")), "")
                print(f"  cell {i}: {took:.0f} s  {first[:90]}", flush=True)
    finally:
        os.chdir(cwd)
        import matplotlib.pyplot as plt
        plt.close("all")
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
