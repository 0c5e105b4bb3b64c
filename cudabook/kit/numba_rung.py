"""A Numba rung's helpers: compile-time constants as launch parameters, and a checked positive integer."""
import types

import numpy as np
from numba import cuda

from .. import SIMULATOR

_SPECIALISED = {}


def python_function(kernel):
    """The Python function behind a Numba kernel (a GPU dispatcher or the simulator's kernel)."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
    if fn is None:
        raise TypeError(f"kernel must be a function decorated with @cuda.jit, got {type(kernel).__name__}")
    return fn


def specialise(kernel, launch_bounds=None, **constants):
    """The same kernel compiled with some of its global constants replaced (TILE=16, say).

    Numba reads a kernel's global variables once, when it compiles, and treats them as constants: that is
    what lets `cuda.shared.array((TILE, TILE), float32)` have a size. To get another size we make a copy of
    the Python function whose globals say TILE = 16, and compile that. Kept, so each size compiles once.
    `launch_bounds` (GPU only) promises the compiler at most that many threads a block, so that it keeps
    each thread's registers within what a block of that size can have."""
    fn = python_function(kernel)
    used = {k: v for k, v in constants.items() if k in fn.__code__.co_names}    # the ones this kernel reads
    bounds = None if SIMULATOR else launch_bounds
    if bounds is None and all(fn.__globals__.get(k) == v for k, v in used.items()):
        return kernel
    key = (fn, tuple(sorted(used.items())), bounds)
    if key not in _SPECIALISED:
        g = dict(fn.__globals__, **used)
        copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
        _SPECIALISED[key] = cuda.jit(copy, **({} if bounds is None else {"launch_bounds": bounds}))
    return _SPECIALISED[key]


def positive_int(name, v, *, most=None):
    """`v` as an int, or a ValueError naming `name` unless it is an integer in 1..most."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1 or (most and v > most):
        raise ValueError(f"{name} must be an integer in 1..{most or 'inf'}, got {v!r}")
    return int(v)
