"""Check an install: `python -m cudabook` says what it found and runs three small checks.

    python -m cudabook            versions, the GPU (or why the simulator), the host C++ compiler, then: a Numba
                                  kernel runs and is right, NVRTC compiles a CUDA C++ kernel for Hopper, a Jupyter
                                  kernel starts
    python -m cudabook --quick    versions, the GPU and the host C++ compiler only

Exit status 0 when every check passed. After installing from a wheelhouse, run it on the node that will run
the workshop: it is the quickest way to see that the GPU, the driver and the CUDA wheels agree.

On macOS it stops at once and says why: the CUDA wheels exist for Linux and Windows only. Without a GPU, the C++
labs are graded in the CPU emulator (cudabook.emulate), which builds each kernel with the host's C++ compiler:
there, no compiler is a failed check; with a GPU it is a warning (the GPU grades the labs it can run).
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


# How to get a host C++ compiler, for the message that says there is none.
INSTALL_CXX = ("Debian/Ubuntu: sudo apt install g++", "Fedora: sudo dnf install gcc-c++",
               "conda: conda install -c conda-forge cxx-compiler")


def platform_problem(system: str) -> str | None:
    """Why this operating system cannot run the workbook at all, or None."""
    if system == "Darwin":
        return ("macOS cannot run this workbook: the CUDA wheels it needs (cuda-bindings, nvidia-cuda-nvrtc) are "
                "built for Linux and Windows only, and there is no CUDA for macOS. Use Linux (x86-64 or aarch64), "
                "WSL2 on a Windows PC, or a Linux VM or cloud machine (one with an NVIDIA GPU runs everything at "
                "full size)")
    return None


def compiler_check(simulator: bool) -> bool:
    """Print whether the CPU emulator has a host C++ compiler (found as the emulator finds it); False only when
    there is none and no GPU, where the C++ labs can be graded by the emulator alone."""
    import subprocess
    label = "FAILED " if simulator else "warning"
    try:
        from .emulate import HostCompilerMissing, host_compiler
    except Exception as e:            # the emulator cannot load here at all (not a POSIX system, say)
        print(f"  {label} C++ compiler: the CPU emulator does not load here (it is built for Linux; on Windows, "
              f"use WSL2): {type(e).__name__}: {e}")
        return not simulator
    try:
        cxx = host_compiler()
    except HostCompilerMissing:
        need = ("without a GPU the CUDA C++ labs are graded in the CPU emulator, which builds each kernel with one"
                if simulator else
                "this GPU grades the C++ labs it can run, but the emulator's second look at a passing lab (the "
                "copies landing as late and as early as its waits allow) and any lab this GPU cannot run need one")
        print(f"  {label} C++ compiler: none found (g++, clang++, c++ or $CXX); {need}. Install one: "
              + "; ".join(INSTALL_CXX))
        return not simulator
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
        version = version.strip().splitlines()[0] if version.strip() else ""
    except (OSError, subprocess.SubprocessError):
        version = ""
    print(f"  ok      C++ compiler for the CPU emulator: {cxx}" + (f" ({version})" if version else ""))
    return True


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
    problem = platform_problem(platform.system())
    if problem:
        print(f"  FAILED  {problem}")
        print("install NOT OK: see FAILED above")
        return 1
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
    ok &= compiler_check(cudabook.SIMULATOR)
    if "--quick" not in args:
        ok &= _check("Numba kernel", numba_kernel)
        ok &= _check("NVRTC", nvrtc_compiles)
        ok &= _check("Jupyter", jupyter_kernel)
    print("install OK" if ok else "install NOT OK: see FAILED above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
