"""Warp operations for Numba's CUDA simulator, which has none of its own.

The simulator runs every CUDA thread of a block as a Python thread. A warp operation here is a small
rendezvous: the live lanes of one warp (32 consecutive thread ids) deposit their values, the last one to
arrive publishes them, and each lane picks what CUDA would give it. Lanes that have already returned from
the kernel are not waited for, as on hardware.

The simulator is stricter than a GPU in one way: a lane that calls a `*_sync` operation without its own bit
in `mask`, or reads from a lane outside `mask`, gets an error that says so. On hardware that is undefined
behaviour that often happens to work, which is exactly why it should fail loudly while you learn.

The blocks themselves run here too (`_run_block`, `_syncthreads`): every wait, at a barrier or in a warp
operation, sleeps until the event it waits for (the last thread arriving, a thread ending) instead of polling.
"""
from __future__ import annotations

import threading

from . import simrace

WARP = 32
FULL_MASK = 0xFFFFFFFF
_WAIT_S = 1.0            # a safety net only: every wait is woken by the event it waits for


class WarpMaskError(RuntimeError):
    pass


class _WarpState:
    def __init__(self):
        self.cond = threading.Condition()
        self.generation = 0
        self.values: dict[int, object] = {}
        self.published: dict[int, dict[int, object]] = {}
        self.finished = 0                     # lanes of this warp that have returned from the kernel


class _BlockState:
    """One running block: its live threads' count, the syncthreads barrier, its warps, and the wake-up call of the
    thread that runs it.
    Every change (a thread at the barrier, a thread ending or failing) happens under `cond` and is announced on
    it, so nothing polls: a waiting thread sleeps until the one event it waits for."""

    def __init__(self, size: int):
        self.cond = threading.Condition()
        self.size = size
        self.alive = size
        self.at_barrier = 0
        self.generation = 0
        self.failed = None                    # the first thread that raised
        self.abort = False
        self.warps = [_WarpState() for _ in range((size + WARP - 1) // WARP)]

    def release_if_all_wait(self):
        """Under `cond`: when every live thread is at the barrier, let them all through."""
        if self.at_barrier and self.at_barrier == self.alive:
            self.at_barrier = 0
            self.generation += 1
            self.cond.notify_all()


def _block_of(thread) -> _BlockState:
    return thread._cudabook_state


def _exchange(value):
    """Deposit `value`; return (my lane, {lane: value} of every lane that took part)."""
    me = threading.current_thread()
    tid = me.thread_id
    base = tid - tid % WARP
    block = _block_of(me)
    size = min(WARP, block.size - base)
    state = block.warps[base // WARP]
    with state.cond:
        generation = state.generation
        state.values[tid] = value
        while state.generation == generation:
            if len(state.values) + state.finished >= size:     # every lane arrived or has returned
                state.published[generation] = {t - base: v for t, v in state.values.items()}
                state.published.pop(generation - 2, None)
                state.values = {}
                state.generation += 1
                state.cond.notify_all()
                break
            if block.abort:
                raise RuntimeError("another simulated thread failed")
            state.cond.wait(_WAIT_S)
        return tid - base, state.published[generation]


def _check_mask(op: str, mask: int, lane: int, src: int | None = None):
    mask = int(mask) & FULL_MASK
    if not (mask >> lane) & 1:
        raise WarpMaskError(f"{op}: lane {lane} called it, but its bit is not set in mask {mask:#010x}")
    if src is not None and not (mask >> src) & 1:
        raise WarpMaskError(f"{op}: lane {lane} reads lane {src}, which is not in mask {mask:#010x}")


def _shuffle(op, mask, value, pick):
    lane, values = _exchange(value)
    src = pick(lane)
    if src is None or not 0 <= src < WARP:
        _check_mask(op, mask, lane)
        return value                    # out of range: a lane keeps its own value
    _check_mask(op, mask, lane, src)
    if src not in values:
        raise WarpMaskError(f"{op}: lane {lane} reads lane {src}, which has exited or did not take part")
    return values[src]


def shfl_sync(mask, value, src_lane):
    return _shuffle("shfl_sync", mask, value, lambda lane: int(src_lane) % WARP)


def shfl_up_sync(mask, value, delta):
    return _shuffle("shfl_up_sync", mask, value, lambda lane: lane - int(delta) if lane >= int(delta) else None)


def shfl_down_sync(mask, value, delta):
    return _shuffle("shfl_down_sync", mask, value, lambda lane: lane + int(delta) if lane + int(delta) < WARP else None)


def shfl_xor_sync(mask, value, lane_mask):
    return _shuffle("shfl_xor_sync", mask, value, lambda lane: lane ^ int(lane_mask))


def ballot_sync(mask, predicate):
    lane, values = _exchange(bool(predicate))
    _check_mask("ballot_sync", mask, lane)
    bits = 0
    for src, p in values.items():
        if p and (int(mask) >> src) & 1:
            bits |= 1 << src
    return bits


def syncwarp(mask=FULL_MASK):
    lane, _ = _exchange(None)
    _check_mask("syncwarp", mask, lane)
    simrace.passed_syncwarp()


def activemask():
    _, values = _exchange(None)
    return sum(1 << lane for lane in values)


_OPS = {
    "shfl_sync": shfl_sync,
    "shfl_up_sync": shfl_up_sync,
    "shfl_down_sync": shfl_down_sync,
    "shfl_xor_sync": shfl_xor_sync,
    "ballot_sync": ballot_sync,
    "syncwarp": syncwarp,
    "activemask": activemask,
}


def _jit_taking_forceinline(jit):
    """The simulator's cuda.jit, taking (and ignoring) `forceinline` as a GPU's does: the workbook's device
    functions are inlined by NVVM (forceinline=True), which compiles several times faster than Numba's own
    inlining of their IR (forceinline=True) for the same code, and the simulator runs Python either way."""
    if getattr(jit, "_cudabook_forceinline", False):
        return jit

    def wrapped(*args, forceinline=False, **kwargs):
        return jit(*args, **kwargs)
    wrapped._cudabook_forceinline = True
    wrapped.__doc__, wrapped.__name__ = jit.__doc__, jit.__name__
    return wrapped


def install() -> None:
    """Teach the simulator's fake `cuda` module the warp operations, and run its blocks with the event-driven
    barrier below (idempotent)."""
    import numba.cuda
    from numba.cuda.simulator import kernel, kernelapi

    numba.cuda.jit = _jit_taking_forceinline(numba.cuda.jit)

    if not getattr(kernel.BlockThread, "_cudabook_registered", False):
        kernel.BlockThread.syncthreads = _syncthreads      # before simrace wraps it to count barriers
        kernel.BlockThread._cudabook_registered = True
        kernel.BlockManager.run = _run_block
        kernel.FakeCUDAKernel.__call__ = _calls(kernel.FakeCUDAKernel.__call__)
        for name, fn in _OPS.items():
            setattr(kernelapi.FakeCUDAModule, name, staticmethod(fn))
    simrace.install()


def _calls(launch):
    """The simulator's FakeCUDAKernel.__call__ with a device function's call made cheap; a launch is `launch`.

    Semantics as in numba-cuda 0.30 (kernelapi.swapped_cuda_module): while any thread is inside a function of a
    module, the names of that module's globals bound to `numba.cuda` are bound to the simulator's fake module, and
    the last thread to leave binds them back. The simulator finds those names by scanning all of the module's
    globals each time the first thread enters, which in a kernel whose helpers live in another module
    (cudabook.bits, a track's helpers) is at nearly every call: a million scans in the resampling labs' planted
    mistakes, with a generator-based context manager and an import statement around each. Here the names found
    are kept for the rest of the launch (a launch starts afresh), and the bookkeeping is done inline, on the
    simulator's own counters and locks."""
    from numba import cuda
    from numba.cuda.simulator import kernel, kernelapi
    counts, saved, locks = kernelapi._swap_refcount, kernelapi._swap_orig, kernelapi._globals_locks
    found: dict = {}        # id(globals) -> (the globals, the names bound to numba.cuda there), this launch

    def call(self, *args):
        if not (self._device or kernel._kernel_context):
            found.clear()
            return launch(self, *args)
        fn = self.fn
        globs = fn.__globals__
        gid = id(globs)
        lock = locks.get(gid)
        if lock is None:
            with kernelapi._locks_register_lock:
                lock = locks[gid]
        with lock:
            if counts[gid] == 0:
                known = found.get(gid)
                if known is None or known[0] is not globs:
                    known = found[gid] = (globs, [k for k, v in globs.items() if v is cuda])
                orig = {k: cuda for k in known[1] if globs.get(k) is cuda}
                saved[gid] = orig
                fake = kernel._get_kernel_context()
                for k in orig:
                    globs[k] = fake
            counts[gid] += 1
        try:
            return fn(*args)
        finally:
            with lock:
                counts[gid] -= 1
                if counts[gid] == 0:
                    globs.update(saved.pop(gid))
                    del counts[gid]
    return call


def _syncthreads(self):
    """__syncthreads for a simulated thread: wait until every live thread of the block has arrived (threads that
    have returned from the kernel are not waited for, as in the simulator)."""
    block = _block_of(self)
    with block.cond:
        if block.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        generation = block.generation
        block.at_barrier += 1
        block.release_if_all_wait()
        while block.generation == generation and not block.abort:
            block.cond.wait(_WAIT_S)
        if block.abort:
            raise RuntimeError("abort flag set on syncthreads clear")


def _run_block(self, grid_point, *args):
    """The simulator's BlockManager.run, event-driven: start a thread per CUDA thread and sleep until they have
    all ended or one has failed. (The simulator's own loop polls every thread's state without pause; with a
    polling loop a 9-target kernel took 0.1 s or 27 s depending on scheduling, and every barrier and warp
    operation waited for the next poll.) Semantics as in numba-cuda 0.30: a barrier lets the block through when
    every live thread is at it; a thread's exception is re-raised here.

    One addition: when a thread fails, the others are given a moment to end before the exception is raised
    (the simulator does not wait). A thread still running holds the simulator's fake `cuda` module in the globals
    of every device function it is inside, so code built from those globals meanwhile (the next kernel a grader
    or a test assembles) would find the fake module where `numba.cuda` belongs."""
    import numpy as np
    from numba.cuda.simulator import kernel

    points = list(np.ndindex(*self._block_dim))
    block = _BlockState(len(points))
    token = simrace.new_block()          # shared memory is the block's own: its race log starts afresh
    threads = []

    def target():
        me = threading.current_thread()
        try:
            self._f(*args)
        except BaseException:
            _ended(block, me, failed=True)
            raise
        _ended(block, me, failed=False)

    for block_point in points:
        t = kernel.BlockThread(target, self, grid_point, block_point, self._debug)
        t._cudabook_block = token
        t._cudabook_state = block
        threads.append(t)
    for t in threads:
        t.start()
    with block.cond:
        while block.alive and block.failed is None:
            block.cond.wait(_WAIT_S)
        failed = block.failed
    if failed is not None:
        _abort(block)
        failed.join()                    # it records its exception as it ends
        _let_the_others_end(threads)
        raise failed.exception[0].with_traceback(failed.exception[1])
    for t in threads:
        t.join()
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def _ended(block: _BlockState, thread, failed: bool):
    """A thread has returned from the kernel (or raised): its warp and the barrier stop waiting for it."""
    warp = block.warps[thread.thread_id // WARP]
    with warp.cond:
        warp.finished += 1
        warp.cond.notify_all()
    with block.cond:
        block.alive -= 1
        if failed and block.failed is None:
            block.failed = thread
        block.release_if_all_wait()
        block.cond.notify_all()


def _abort(block: _BlockState):
    """Tell every thread still waiting, at the barrier or in a warp operation, that the block has failed."""
    with block.cond:
        block.abort = True
        block.cond.notify_all()
    for warp in block.warps:
        with warp.cond:
            warp.cond.notify_all()


_END_WAIT_S = 5.0


def _let_the_others_end(threads, wait_s=_END_WAIT_S):
    """Join a failed block's other threads, at most `wait_s` in all: those at a syncthreads or a warp operation
    see the abort flag and leave; the rest run to their end (a thread in an endless loop is left behind)."""
    import time

    deadline = time.monotonic() + wait_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
