"""Shared-memory races, caught in Numba's CUDA simulator whatever order its threads happen to run in.

On a GPU a missing barrier often goes unseen: the warp that reads happens to run after the one that writes. The
simulator runs each CUDA thread in turns of its own choosing (greenlets, or Python threads: see simwarp), so it
hides races the same way. Here every shared array the simulator hands out remembers, per element, who last
wrote it and who last read it, and how many barriers each had passed then. A thread that reads an element another thread
wrote, or writes an element another thread read, with no barrier ordering the two, stops with a SharedRace
error that names the array, the element, both threads and the barrier that would order them:

- cuda.syncthreads() orders everything before it, in any thread of the block, before everything after it;
- cuda.syncwarp() does the same for the threads of one warp.

Warp shuffles exchange registers; they do not order shared memory (the CUDA C++ Programming Guide promises
that of __syncwarp and the barriers only), so they count for nothing here. Atomics are not checked.
"""
from __future__ import annotations

import operator

import numpy as np

from .simthread import current_thread

WARP = 32


class SharedRace(RuntimeError):
    """Two threads touched one shared-memory element, one of them writing, with no barrier between them."""


def _me():
    t = _current()
    return t if hasattr(t, "thread_id") else None


def _ordered(earlier_tid, earlier_bars, earlier_warpsyncs, later_tid, later_bars, later_warpsyncs):
    """Is an access made by `earlier_tid` with those counts ordered before one by `later_tid` now?"""
    if later_bars > earlier_bars:
        return True
    return earlier_tid // WARP == later_tid // WARP and later_warpsyncs > earlier_warpsyncs


_blocks = iter(range(1, 1 << 62))


def new_block() -> int:
    """A token for a block about to run: the tracked arrays forget what earlier blocks did."""
    return next(_blocks)


class Tracked(np.ndarray):
    """A shared array that checks each access of one element (see the module's text). Created by `track`."""

    def __array_finalize__(self, obj):
        self._log = None                 # a view, a slice or a copy is not checked (track sets the log)
        self._name = getattr(obj, "_name", "a shared array")

    def __getitem__(self, index):
        value = _get(self, index)
        log = self._log
        if log is None:
            return value
        access = _access(self, log, index)
        if access is None:
            return value
        key, tid, bars, syncs = access
        entry = log.get(key)
        if entry is None:
            log[key] = [-1, 0, 0, tid, bars, syncs]
            return value
        w = entry[0]
        if w >= 0 and w != tid and not _ordered(w, entry[1], entry[2], tid, bars, syncs):
            _race(self, key, "reads", tid, "wrote", w)
        entry[3], entry[4], entry[5] = tid, bars, syncs
        return value

    def __setitem__(self, index, value):
        log = self._log
        access = None if log is None else _access(self, log, index)
        if access is not None:
            key, tid, bars, syncs = access
            entry = log.get(key)
            if entry is not None:
                r = entry[3]
                if r >= 0 and r != tid and not _ordered(r, entry[4], entry[5], tid, bars, syncs):
                    _race(self, key, "writes", tid, "read", r)
            log[key] = [tid, bars, syncs, -1, 0, 0]
        _set(self, index, value)


_get, _set, _index = np.ndarray.__getitem__, np.ndarray.__setitem__, operator.index


_current = current_thread         # the simulated thread running now (a greenlet's, or the Python thread)


def _access(array, log, index):
    """(the element's index as a tuple of ints, the thread's id, its barriers, its syncwarps) for an access that
    is checked; None for one that is not: from a thread that is not a simulated one, inside an atomic, or of a
    slice or an array index. A new block's first access empties the array's log. (Run at every access of a
    shared array by every simulated thread: one function, the thread's attributes read directly.)"""
    t = _current()
    try:
        tid = t.thread_id
        key = tuple(map(_index, index)) if type(index) is tuple else (_index(index),)
    except (AttributeError, TypeError):
        return None
    if getattr(t, "_cudabook_atomic", False):
        return None
    block = getattr(t, "_cudabook_block", 0)
    if array._block != block:
        log.clear()
        array._block = block
    return key, tid, getattr(t, "_cudabook_bars", 0), getattr(t, "_cudabook_warpsyncs", 0)


def _race(array, key, does, tid, did, other):
    same_warp = tid // WARP == other // WARP
    barrier = ("cuda.syncwarp() (the two are in one warp) or a cuda.syncthreads()" if same_warp
               else "cuda.syncthreads() (the two are in different warps)")
    raise SharedRace(
        f"a race on shared memory: thread {tid} {does} {array._name}[{', '.join(map(str, key))}], which thread "
        f"{other} {did} with no barrier between the two. On a GPU the result depends on which runs first. A "
        f"{barrier} between the write and the read orders them, reached by both: a barrier inside an `if` that "
        f"one of them skips, or in a loop it leaves early, orders nothing for it.")


def _never_written(shape, dtype) -> np.ndarray:
    """A new static shared array (cuda.shared.array of a shape) as a GPU hands it out, unwritten: all bits set (NaN
    where it holds floats, -1 in an integer array), so that a value read before anything was stored shows, even
    where a zero would have hidden it (GEMM 02's tiles zero-filled on one side only: the other side's zeros
    cancelled what the unfilled side held, until it holds NaN, as a GPU's shared memory may). The CPU emulator's
    shared memory starts as NaN too. The dynamic shared buffer stays as the simulator makes it (zeros): msda 03's
    hints read a tile slot never staged as a zero there."""
    out = np.empty(shape, dtype)
    out.view(np.uint8)[...] = 0xFF
    return out


def track(array: np.ndarray, name: str) -> Tracked:
    """`array` (a simulator's shared array), checked on every access of one element from now on."""
    tracked = array.view(Tracked)
    tracked._log = {}
    tracked._block = 0
    tracked._name = name
    return tracked


def passed_syncwarp():
    """The calling simulated thread passed a cuda.syncwarp()."""
    t = _me()
    if t is not None:
        t._cudabook_warpsyncs = getattr(t, "_cudabook_warpsyncs", 0) + 1


def install() -> None:
    """Make the simulator's shared arrays tracked ones, count each thread's barriers, and let atomics through
    (idempotent; simwarp.install calls it)."""
    import sys
    import traceback

    from numba.cuda.simulator import kernel, kernelapi

    if getattr(kernelapi.FakeCUDAShared, "_cudabook_tracked", False):
        return
    from numba.core import types
    from numba.np import numpy_support

    def array(self, shape, dtype, alignment=None):
        """numba-cuda 0.30's FakeCUDAShared.array (one array per line of source that asks; the dynamic ones share
        one buffer), handing out tracked arrays."""
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        dtype = np.dtype(dtype)
        if shape == 0:
            key = ("dynamic", dtype.str)
            made = self._allocations.get(key)
            if made is None:
                count = self._dynshared_size // dtype.itemsize
                made = self._allocations[key] = track(
                    np.frombuffer(self._dynshared.data, dtype=dtype, count=count), "the dynamic shared array")
            return made
        frame = sys._getframe(1)                   # (every thread asks: the line's text is read once)
        key = (frame.f_code.co_filename, frame.f_lineno)
        made = self._allocations.get(key)
        if made is None:
            caller = traceback.extract_stack(frame, limit=1)[0]
            name = (caller.line or "").split("=")[0].strip() or f"the shared array made at line {caller.lineno}"
            made = self._allocations.setdefault(key, track(_never_written(shape, dtype), name))   # (the first one made)
        return made

    kernelapi.FakeCUDAShared.array = array
    kernelapi.FakeCUDAShared._cudabook_tracked = True

    original_sync = kernel.BlockThread.syncthreads

    def syncthreads(self):
        original_sync(self)
        self._cudabook_bars = getattr(self, "_cudabook_bars", 0) + 1
    kernel.BlockThread.syncthreads = syncthreads

    for name in [n for n in vars(kernelapi.FakeCUDAAtomic) if not n.startswith("_")]:
        setattr(kernelapi.FakeCUDAAtomic, name, _unchecked(getattr(kernelapi.FakeCUDAAtomic, name)))


def _unchecked(method):
    def atomic(self, *args, **kwargs):
        t = _me()
        if t is None:
            return method(self, *args, **kwargs)
        t._cudabook_atomic = True
        try:
            return method(self, *args, **kwargs)
        finally:
            t._cudabook_atomic = False
    return atomic
