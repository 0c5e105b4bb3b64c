"""Check an install: `python -m cudabook` says what it found and runs three small checks.

    python -m cudabook            versions, the GPU (or why the simulator), then: a Numba kernel runs and is
                                  right, NVRTC compiles a CUDA C++ kernel for Hopper, a Jupyter kernel starts
    python -m cudabook --quick    versions and the GPU only

Exit status 0 when every check passed. After installing from a wheelhouse, run it on the node that will run
the workshop: it is the quickest way to see that the GPU, the driver and the CUDA wheels agree.
"""
from __future__ import annotations

import sys
import time

PACKAGES = ("numpy", "numba", "numba-cuda", "cuda-python", "cuda-bindings", "cuda-core", "nvidia-cuda-nvrtc",
            "ml_dtypes", "jupyterlab", "ipykernel")


def versions() -> dict[str, str | None]:
    from importlib import metadata
    found = {}
    for p in PACKAGES:
        try:
            found[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            found[p] = None
    return found


def _check(what: str, fn) -> bool:
    start = time.perf_counter()
    try:
        detail = fn()
    except Exception as e:
        print(f"  FAILED  {what}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        return False
    print(f"  ok      {what}{': ' + detail if detail else ''} ({time.perf_counter() - start:.1f} s)")
    return True


def numba_kernel() -> str:
    import numpy as np

    from . import resample
    args = resample.random_problem(2, 50, 40, 9, rng=np.random.default_rng(0))
    verdict = resample.judge(resample.run("01_naive", *args), *args)
    if not verdict.ok:
        raise AssertionError(f"resampling 01 gave a wrong answer: {verdict}")
    from . import SIMULATOR
    return "resampling 01 is right, " + ("in the simulator" if SIMULATOR else "on the GPU")


def nvrtc_compiles() -> str:
    import os

    from .resample import s06_cp_async
    before = os.environ.get("CUDABOOK_NO_DISK_CACHE")
    os.environ["CUDABOOK_NO_DISK_CACHE"] = "1"          # compile for real, not a cubin cached by an earlier run
    try:
        cubin = s06_cp_async.compile_cubin(arch="sm_90a")
    finally:
        if before is None:
            del os.environ["CUDABOOK_NO_DISK_CACHE"]
        else:
            os.environ["CUDABOOK_NO_DISK_CACHE"] = before
    if cubin[:4] != b"\x7fELF":
        raise AssertionError("NVRTC did not return a cubin")
    return f"resampling 06 for sm_90a, {len(cubin):,} bytes of machine code"


def jupyter_kernel() -> str:
    import pathlib
    import tempfile

    import nbformat

    from .workbook import execute
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import cudabook")])
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "check.ipynb"
        nbformat.write(nb, path)
        ok, seconds, err = execute(path, None, 300)
    if not ok:
        raise RuntimeError(err)
    return "a notebook ran `import cudabook` in a fresh kernel"


def main(argv=None) -> int:
    import os
    import platform
    args = sys.argv[1:] if argv is None else argv
    import cudabook
    print(f"cudabook {cudabook.__version__} at {os.path.dirname(cudabook.__file__)}")
    print(f"Python {platform.python_version()} ({sys.executable}) on {platform.machine()} {platform.system()}")
    found = versions()
    print(", ".join(f"{k} {v or 'MISSING'}" for k, v in found.items()))
    print(cudabook.where())
    ok = all(found[p] for p in PACKAGES)
    if not ok:
        print("  FAILED  some packages are missing: " + ", ".join(p for p in PACKAGES if not found[p]))
    numpy = tuple(int(x) for x in (found["numpy"] or "0.0").split(".")[:2])
    if numpy >= (2, 5):
        print(f"  FAILED  numpy {found['numpy']}: numba-cuda 0.30 needs numpy below 2.5")
        ok = False
    if "--quick" not in args:
        ok &= _check("Numba kernel", numba_kernel)
        ok &= _check("NVRTC", nvrtc_compiles)
        ok &= _check("Jupyter", jupyter_kernel)
    print("install OK" if ok else "install NOT OK: see FAILED above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
