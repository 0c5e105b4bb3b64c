"""Warp operations for Numba's CUDA simulator, which has none of its own.

The simulator runs every CUDA thread of a block as a Python thread. A warp operation here is a small
rendezvous: the live lanes of one warp (32 consecutive thread ids) deposit their values, the last one to
arrive publishes them, and each lane picks what CUDA would give it. Lanes that have already returned from
the kernel are not waited for, as on hardware.

The simulator is stricter than a GPU in one way: a lane that calls a `*_sync` operation without its own bit
in `mask`, or reads from a lane outside `mask`, gets an error that says so. On hardware that is undefined
behaviour that often happens to work, which is exactly why it should fail loudly while you learn.

The blocks themselves run here too (`_run_block`, `_syncthreads`). Where the `greenlet` package is installed
(the workbook's own requirements), a block's simulated threads are greenlets taking turns on the one thread that
launched the kernel: each runs until it waits (at a barrier or a warp operation) or ends, and the last one to
arrive lets the others go on. A wait then costs about a microsecond a thread in place of the tens of microseconds
a Python thread needs to hand the interpreter to another (the barrier-heavy labs ran several times slower that
way), and a block whose threads all wait with none able to go on stops at once with a message that says where
they wait. One kernel this cannot run: a thread that spins on a flag another thread of the block sets (legal on
a GPU since Volta) never gives up its turn, and the check's time limit stops it; CUDABOOK_SIM_THREADS=1 runs it.
Without greenlet (or with CUDABOOK_SIM_THREADS=1) each simulated thread is a Python thread, as in Numba's
simulator, and every wait sleeps until the event it waits for (the last thread arriving, a thread ending)
instead of polling.
"""
from __future__ import annotations

import collections
import os
import threading

from . import simrace
from .simthread import current_thread
from .simthread import running as _running

try:
    import greenlet as _greenlet
except ImportError:         # pragma: no cover - the workbook's requirements include it
    _greenlet = None

WARP = 32
FULL_MASK = 0xFFFFFFFF
_WAIT_S = 1.0            # a safety net only: every wait is woken by the event it waits for


class WarpMaskError(RuntimeError):
    pass


class SimulatedDeadlock(RuntimeError):
    """Every simulated thread of a block still running waits, and none of the waits can end."""


def greenlets() -> bool:
    """Are blocks run as greenlets (see the module's text)?"""
    return _greenlet is not None and os.environ.get("CUDABOOK_SIM_THREADS", "") in ("", "0")


class _ThreadingWithSimulatedThreads:
    """threading as the simulator's kernelapi sees it: current_thread() names the simulated thread."""
    current_thread = staticmethod(current_thread)

    def __getattr__(self, name):
        return getattr(threading, name)


class _WarpState:
    def __init__(self):
        self.cond = threading.Condition()
        self.generation = 0
        self.values: dict[int, object] = {}
        self.published: dict[int, dict[int, object]] = {}
        self.finished = 0                     # lanes of this warp that have returned from the kernel
        self.waiting: list = []               # (greenlets) the simulated threads parked in the exchange


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
        self.waiting: list = []               # (greenlets) the simulated threads parked at the barrier
        self.runnable = None                  # (greenlets) the threads ready to take their turn, in order
        self.scheduler = None                 # (greenlets) the greenlet that hands out the turns

    def release_if_all_wait(self):
        """Under `cond`: when every live thread is at the barrier, let them all through."""
        if self.at_barrier and self.at_barrier == self.alive:
            self.at_barrier = 0
            self.generation += 1
            self.cond.notify_all()


def _block_of(thread) -> _BlockState:
    return thread._cudabook_state


def _publish(state, base):
    """The exchange of `state` is complete: publish its values and let its waiting lanes go on (greenlets)."""
    generation = state.generation
    state.published[generation] = {t - base: v for t, v in state.values.items()}
    state.published.pop(generation - 2, None)
    state.values = {}
    state.generation += 1
    return generation


def _park(block, queue, me):
    """(greenlets) Wait in `queue` (the barrier's or a warp exchange's): give the turn back to the block's
    scheduler until another thread lets this one go on (or unwinds it, after a failure)."""
    queue.append(me)
    block.scheduler.switch()


def _exchange_complete(block, state, base):
    """(greenlets) The exchange of `state` has every lane it waits for: publish it, its waiting lanes go on."""
    _publish(state, base)
    block.runnable.extend(state.waiting)
    state.waiting = []


def _let_through(block) -> bool:
    """(greenlets) If every live thread is at the barrier, let the waiting ones go on; say whether it did."""
    if not (block.at_barrier and block.at_barrier == block.alive):
        return False
    block.at_barrier = 0
    block.generation += 1
    block.runnable.extend(block.waiting)
    block.waiting = []
    return True


def _exchange(value):
    """Deposit `value`; return (my lane, {lane: value} of every lane that took part)."""
    me = current_thread()
    tid = me.thread_id
    base = tid - tid % WARP
    block = _block_of(me)
    size = min(WARP, block.size - base)
    state = block.warps[base // WARP]
    if block.runnable is not None:              # greenlets: one thread runs at a time, no lock needed
        generation = state.generation
        state.values[tid] = value
        if len(state.values) + state.finished >= size:
            _exchange_complete(block, state, base)
        else:
            _park(block, state.waiting, me)
        return tid - base, state.published[generation]
    with state.cond:
        generation = state.generation
        state.values[tid] = value
        while state.generation == generation:
            if len(state.values) + state.finished >= size:     # every lane arrived or has returned
                _publish(state, base)
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
    inlining of their IR (inline=True) for the same code, and the simulator runs Python either way."""
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
    kernelapi.threading = _ThreadingWithSimulatedThreads()      # threadIdx, syncthreads: the simulated thread's

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
    if block.runnable is not None:              # greenlets
        block.at_barrier += 1
        if not _let_through(block):
            _park(block, block.waiting, self)
        return
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
    if greenlets():
        return _run_block_greenlets(self, block, token, points, grid_point, args)
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


def _run_block_greenlets(manager, block, token, points, grid_point, args):
    """_run_block with each simulated thread a greenlet on this thread (see the module's text): the threads take
    turns in order, each until it waits or ends; a thread's exception is re-raised here once the others have
    been unwound (their device functions' globals restored)."""
    from numba.cuda.simulator import kernel

    block.runnable = collections.deque()
    block.scheduler = _greenlet.getcurrent()
    threads = []
    for block_point in points:
        t = kernel.BlockThread(None, manager, grid_point, block_point, manager._debug)
        t._cudabook_block = token
        t._cudabook_state = block
        t._cudabook_done = False

        def body(t=t):
            try:
                if manager._debug:              # as BlockThread does in debug mode
                    import numpy as np
                    np.seterr(divide="raise")
                manager._f(*args)
            except BaseException as e:          # recorded, and re-raised by the scheduler (not an unwinding)
                if not isinstance(e, _greenlet.GreenletExit):
                    _record_failure(t, e)
                    if block.failed is None:
                        block.failed = t
            finally:
                t._cudabook_done = True
                _ended_greenlet(block, t)
        t._cudabook_greenlet = _greenlet.greenlet(body, parent=block.scheduler)
        threads.append(t)
    block.runnable.extend(threads)
    outer = getattr(_running, "thread", None)
    try:
        while block.runnable and block.failed is None:
            t = block.runnable.popleft()
            _running.thread = t
            t._cudabook_greenlet.switch()
    except BaseException:           # (an interrupt between turns): unwind the parked threads, as on a failure
        _unwind(block, [t for t in threads if not t._cudabook_done], outer)
        raise
    finally:
        _running.thread = outer
    stuck = [t for t in threads if not t._cudabook_done]
    if block.failed is None and stuck:
        message = _deadlock_message(block, stuck)
        _unwind(block, stuck, outer)
        raise SimulatedDeadlock(message)
    if block.failed is not None:
        _unwind(block, stuck, outer)
        exc, tb = block.failed.exception
        raise exc.with_traceback(tb)


def _record_failure(t, e):
    """As BlockThread.run records a thread's exception: its message led by the thread's and block's indices."""
    import sys
    tid, ctaid = f"tid={list(t.threadIdx)}", f"ctaid={list(t.blockIdx)}"
    try:
        text = str(e)
        made = type(e)(f"{tid} {ctaid}" if text == "" else f"{tid} {ctaid}: {text}")
    except Exception:          # an exception that cannot say itself, or wants other arguments, stays as it is
        made = e
    t.exception = (made, sys.exc_info()[2])


def _unwind(block, stuck, outer):
    """End the threads still parked (their `finally` blocks run: each device function's globals restored)."""
    for t in stuck:
        if not t._cudabook_greenlet.dead:
            _running.thread = t
            try:
                t._cudabook_greenlet.throw(_greenlet.GreenletExit)
            finally:
                _running.thread = outer


def _deadlock_message(block, stuck) -> str:
    at_barrier = [t.thread_id for t in stuck if t in block.waiting]
    in_warp_ops = sorted(t.thread_id for w in block.warps for t in w.waiting)
    parts = []
    if at_barrier:
        parts.append(f"{len(at_barrier)} at cuda.syncthreads() (threads {_some(at_barrier)})")
    if in_warp_ops:
        parts.append(f"{len(in_warp_ops)} in a warp operation (shuffle, ballot; threads {_some(in_warp_ops)}) "
                     f"that other lanes of their warp never reach")
    return ("the block's threads all wait and none can go on: " + "; ".join(parts) + ". A barrier that only "
            "some threads reach never completes (on a GPU the kernel hangs). The simulator's warp operations also "
            "wait for every lane of the warp that has not returned, whatever the mask: lanes on another path (a "
            "mask naming only some lanes is legal on a GPU) leave them waiting here, so give the operation to "
            "every lane, or let the others return first.")


def _some(ids) -> str:
    """The first few of some thread ids, in order."""
    ids = sorted(ids)
    return ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "")


def _ended_greenlet(block: _BlockState, thread):
    """(greenlets) A thread has returned from the kernel (or raised): its warp's exchange and the barrier stop
    waiting for it."""
    warp = block.warps[thread.thread_id // WARP]
    warp.finished += 1
    base = (thread.thread_id // WARP) * WARP
    size = min(WARP, block.size - base)
    if warp.values and len(warp.values) + warp.finished >= size:
        _exchange_complete(block, warp, base)
    block.alive -= 1
    _let_through(block)


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
