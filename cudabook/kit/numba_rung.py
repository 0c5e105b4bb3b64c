"""A Numba rung's helpers: compile-time constants as launch parameters, one compile for a kernel and its copies,
and a checked positive integer."""
import builtins
import sys
import types
import weakref

import numpy as np
from numba import cuda

from .. import SIMULATOR

_SPECIALISED = {}
_RESOLVED = weakref.WeakKeyDictionary()         # kernel -> what twin() gave it
_PACKAGE = __name__.split(".")[0]               # "cudabook"


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
    kernel = twin(kernel)
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


def twin(kernel):
    """The kernel that runs for `kernel`. A lesson defines its own copy of a rung's kernel from the rung's text
    and checks it; the ladder then times the rung, and Numba would compile the same code twice (seconds each for
    the larger kernels). So a kernel defined outside the workbook's package (in a notebook) runs as the
    package's kernel of the same name where the two have the same fingerprint (below); every other kernel runs
    as itself: the package's own, and a learner's changed one. Worked out once per kernel object, at its first
    launch, from the globals as they are then, as Numba freezes them at its first compile. In the simulator
    nothing is compiled, and each kernel runs as itself."""
    if SIMULATOR:
        return kernel
    try:
        return _RESOLVED[kernel]                # a launch pays a lookup, not a fingerprint
    except (KeyError, TypeError):
        pass
    found = package_twin(kernel)
    try:
        _RESOLVED[kernel] = found
    except TypeError:
        pass
    return found


def _of_package(module_name: str) -> bool:
    return module_name == _PACKAGE or module_name.startswith(_PACKAGE + ".")


def _in_package(fn) -> bool:
    return _of_package(getattr(fn, "__module__", None) or "")


def package_twin(kernel):
    """The workbook package's kernel named as `kernel` is, with its fingerprint, or `kernel` itself: itself
    when it is the package's own, when it was given explicit signatures (Numba then compiles those alone), and
    when something it reads cannot be compared."""
    try:
        fn = python_function(kernel)
        if _in_package(fn) or not getattr(kernel, "_can_compile", True):
            return kernel
        mine = None
        for name, module in list(sys.modules.items()):
            if module is None or not _of_package(name):
                continue
            other = getattr(module, fn.__name__, None)
            if other is None or other is kernel or not getattr(other, "_can_compile", True):
                continue
            try:
                theirs = python_function(other)
            except TypeError:
                continue
            if not _in_package(theirs):
                continue
            mine = mine or fingerprint(kernel)
            if fingerprint(other) == mine:
                return other
    except Exception:       # noqa: BLE001 (something we cannot compare: no sharing, no harm)
        return kernel
    return kernel


class Unshareable(TypeError):
    """A kernel reads something whose effect on the compile cannot be compared (a module of the learner's)."""


def fingerprint(kernel):
    """A hashable description of what Numba compiles for `kernel` (a Numba kernel or device function): its
    instructions, constants, defaults and closure, its jit options, and for every global it reads the value
    (numbers, strings, tuples, an array's bytes), a library module's name (numba, numpy, math, the workbook's;
    any other module raises Unshareable: what it holds may change), a device function's own fingerprint, or,
    for anything else, the object's identity. Where the code was written (file, line) is left out. Worked out
    afresh each call: a helper's globals may have changed since."""
    fn = python_function(kernel)
    options = getattr(kernel, "targetoptions", None)
    return ("kernel", _function_print(fn, set()), _value_print(dict(options or {}), set()))


def _function_print(fn, seen):
    if id(fn) in seen:                          # a function that reaches itself: named, not followed again
        return ("again", fn.__qualname__)
    seen = seen | {id(fn)}
    code = fn.__code__
    g = fn.__globals__
    reads = tuple((n, _value_print(g[n], seen) if n in g else
                   ("builtin", n, id(getattr(builtins, n, None)))) for n in sorted(_global_names(code)))
    closure = tuple(_value_print(c.cell_contents, seen) for c in (fn.__closure__ or ()))
    return ("function", _code_print(code), _value_print(fn.__defaults__, seen),
            _value_print(fn.__kwdefaults__, seen), closure, reads)


def _global_names(code) -> set:
    """The names the code (and the code nested in it) loads as globals: not the attribute names beside them."""
    import dis
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


def _code_print(code):
    """The code's instructions, compared by what they do: a call on a name imported in the same file compiles
    to other opcodes (LOAD_ATTR, not LOAD_METHOD, in Python 3.11) and so shifts every offset, so opcodes are
    taken with LOAD_METHOD read as LOAD_ATTR, operands by value, and jumps by the instruction they land on."""
    import dis
    every = list(dis.get_instructions(code))
    found = [ins for ins in every if ins.opname != "EXTENDED_ARG"]     # a prefix for a large operand
    index, i = {}, len(found)
    for ins in reversed(every):                 # a jump's target: the instruction at or after the offset
        if ins.opname != "EXTENDED_ARG":
            i -= 1
        index[ins.offset] = i
    steps = []
    for ins in found:
        name = "LOAD_ATTR" if ins.opname == "LOAD_METHOD" else ins.opname
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            steps.append((name, "->", index.get(ins.argval, ins.argval)))
        elif isinstance(ins.argval, types.CodeType):
            steps.append((name, _code_print(ins.argval)))
        else:
            steps.append((name, _value_print(ins.argval, set()) if ins.argval is not None else None))
    return (tuple(steps), code.co_varnames, code.co_freevars, code.co_cellvars, code.co_argcount,
            code.co_kwonlyargcount, code.co_flags & 0xFFFF)


_LIBRARIES = ("numba", "numpy", "math", "cmath", "operator", _PACKAGE)


def _value_print(v, seen):
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes, np.number, np.bool_)):
        return ("v", type(v).__name__, repr(v))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_value_print(x, seen) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((repr(k), _value_print(x, seen)) for k, x in v.items())))
    if isinstance(v, np.ndarray):               # a global array is a constant of the compile: its bytes count
        import hashlib
        return ("array", v.dtype.str, v.shape, hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest())
    if isinstance(v, types.ModuleType):
        if v.__name__.split(".")[0] not in _LIBRARIES:
            raise Unshareable(f"reads the module {v.__name__}")
        return ("module", v.__name__)
    if isinstance(v, types.FunctionType):
        return _function_print(v, seen)
    fn = getattr(v, "py_func", None) or getattr(v, "fn", None)
    if isinstance(fn, types.FunctionType):     # a Numba kernel or device function (GPU or simulator)
        options = getattr(v, "targetoptions", None)
        return ("jit", _function_print(fn, seen), _value_print(dict(options or {}), seen))
    return ("id", id(v))                        # compared while both are alive: the same id is the same object
