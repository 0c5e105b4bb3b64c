"""A kernel that is right in the simulator must also compile for a GPU.

The simulator runs a kernel's Python as Python: lists, `np.interp`, recursion, a dict... all run, and a grader
that only runs the simulator would say PASS to code no GPU compiles. So the grader also compiles the learner's
kernel with Numba's real compiler, for a GPU target, in a child process (the simulator is chosen when numba is
imported, so this process cannot switch): the kernel's source, executed in the stage module's namespace, with
the argument types the stage's launch passed in the simulator. No GPU is needed, only NVVM.

    with recording() as launches:   ...grade...     launches[name] = [argument specs of its last launch]
    problem = compile_for_gpu(kernel, "cudabook.resample.s02_warp_shuffles", specs)   # None: it compiles
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np


class CannotCheck(RuntimeError):
    """The check itself could not run (no source for the kernel, no NVVM...): say so, do not fail the learner."""


def _spec(value):
    array = getattr(value, "_ary", None)
    if array is None and hasattr(value, "_item"):          # FakeWithinKernelCUDAArray wraps a FakeCUDAArray
        array = getattr(value._item, "_ary", None)
    if array is None and isinstance(value, np.ndarray):
        array = value
    if array is not None:
        layout = "C" if array.flags.c_contiguous else ("F" if array.flags.f_contiguous else "A")
        return ["array", array.dtype.str, array.ndim, layout]
    if isinstance(value, (bool, np.bool_)):
        return ["scalar", "bool"]
    if isinstance(value, np.generic):
        return ["scalar", value.dtype.name]
    if isinstance(value, int):
        return ["scalar", "int64"]
    if isinstance(value, float):
        return ["scalar", "float64"]
    raise CannotCheck(f"an argument of type {type(value).__name__}")


@contextlib.contextmanager
def recording():
    """Record, per kernel function name, the argument specs of each simulated launch."""
    from numba.cuda.simulator import kernel as simulated
    seen: dict = {}
    original = simulated.FakeCUDAKernel.__call__

    def call(self, *args):
        if not self._device and not simulated._kernel_context:
            try:
                seen[self.fn.__name__] = [_spec(a) for a in args]
            except CannotCheck:
                seen[self.fn.__name__] = None
        return original(self, *args)
    simulated.FakeCUDAKernel.__call__ = call
    try:
        yield seen
    finally:
        simulated.FakeCUDAKernel.__call__ = original


_CHILD = r"""
import importlib, json, sys, textwrap
import cudabook
assert not cudabook.SIMULATOR
import numpy as np
from numba import cuda, types, from_dtype
job = json.loads(sys.stdin.read())
def numba_type(spec):
    if spec[0] == "array":
        return types.Array(from_dtype(np.dtype(spec[1])), spec[2], spec[3])
    return getattr(types, {"bool": "boolean"}.get(spec[1], spec[1]))
# Device functions called by a kernel are compiled for "the current device"; there is none here, so name one
# (the target of this compile): compiling needs NVVM, not a GPU.
import numba.cuda.dispatcher as _dispatcher
class _Target:
    compute_capability = tuple(job["cc"])
_dispatcher.get_current_device = lambda: _Target()
module = importlib.import_module(job["module"])
signature = tuple(numba_type(s) for s in job["specs"])
control = getattr(module, job["control"], None) if job["control"] else None
import linecache
linecache.cache["<your kernel>"] = (len(job["source"]), None, job["source"].splitlines(True), "<your kernel>")
namespace = dict(vars(module))
exec(compile(job["source"], "<your kernel>", "exec"), namespace)
fn = namespace[job["name"]]
fn = getattr(fn, "py_func", fn)
try:
    cuda.compile_ptx(fn, signature, cc=tuple(job["cc"]))
    print(json.dumps({"ok": True}))
except Exception as e:
    lines = [l for l in str(e).splitlines() if l.strip() and not l.startswith(("During:", "For more information"))]
    if control is not None:     # the stage's own kernel too: if it fails as well, the check cannot run here
        try:
            cuda.compile_ptx(control.py_func, signature, cc=tuple(job["cc"]))
        except Exception as c:
            print(json.dumps({"cannot": f"{type(c).__name__}: {str(c).splitlines()[0][:300]}"}))
            sys.exit(0)
    print(json.dumps({"error": f"{type(e).__name__}: " + "\n".join(lines[:8])}))
"""


def compile_for_gpu(kernel, module_name: str, specs, *, control: str | None = None, cc=(9, 0),
                    timeout=240) -> str | None:
    """None if the kernel compiles for sm_{cc}; else the compiler's message. CannotCheck if the check cannot
    run (no source for the kernel, no NVVM, or the stage's own kernel `control` does not compile either). The
    control is compiled only when the kernel fails (a right kernel costs one compile, not two: 8-10 s of NVVM
    on a CPU for resampling 05)."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise CannotCheck("the kernel's source cannot be read (defined with exec?)") from None
    if specs is None:
        raise CannotCheck("the launch's argument types are unknown")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDABOOK_SET_CUDASIM",
                                                             "CUDABOOK_SIMULATOR")}
    env.update(CUDABOOK_COMPILE_ONLY="1", PYTHONPATH=root + os.pathsep + env.get("PYTHONPATH", ""))
    job = dict(module=module_name, name=fn.__name__, source=source, specs=specs, cc=list(cc), control=control)
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(job), capture_output=True,
                              text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CannotCheck(f"compiling took more than {timeout} s") from None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise CannotCheck("the compiler process failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]) from None
    if "cannot" in answer:
        raise CannotCheck("the stage's own kernel does not compile here either: " + answer["cannot"])
    return answer.get("error")
