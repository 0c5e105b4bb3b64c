"""Is a kernel right? Every track answers the same way: fresh random inputs, an output poisoned with NaN so an
unwritten element fails, a float64 reference, a tolerance derived from the arithmetic, and a diagnosis.

    check_case(track, launch, inputs)      any track: upload, poison, launch (within a time limit), judge
    launch_within(launch, problem)         a launch that must finish within TIME_LIMIT_S (KernelTimeout)
    Verdict, bf16_half_ulp                 shared by every track's judge

Each track's own checks live beside it, in cudabook/<track>/checking.py (the resampling lessons' short ones:
`resample.check_launch(s01.launch, B, S, T, D)`, `resample.check_on`, `resample.compare`).
"""
from __future__ import annotations

from .errors import KernelTimeout
from .progress import FIRST_LAUNCH, watched
from .track import get
from .verdict import Verdict, bf16_half_ulp  # noqa: F401

RACE_HINT = ("the output differs between two runs on the same inputs: a race (threads reading shared memory "
             "that others are still writing, overwriting a buffer someone still reads: a missing barrier?, or "
             "two threads storing to the same output element: a guard or an index that lets a thread write "
             "past its own share?)")


TIME_LIMIT_S = {"simulator": 60, "gpu": 60}   # seconds a launch may take in a check (cases take a few)


def launch_within(launch, problem, seconds=None, **params):
    """launch(problem, **params), then wait at most `seconds` for it to finish; KernelTimeout if it does not.

    On a GPU the launch returns at once and a CUDA event is polled (the main thread stays interruptible). In the
    simulator the kernel runs in Python on the calling thread, so it runs on a helper thread while this one
    waits: Jupyter's Interrupt then stops the wait (the simulated threads of an endless kernel keep spinning
    until the notebook's kernel is restarted, which the message says)."""
    import threading
    import time

    from . import SIMULATOR, emulate
    seconds = seconds or TIME_LIMIT_S["simulator" if SIMULATOR else "gpu"]
    if emulate.active():        # a C++ stage on the CPU: the emulator keeps its own time limit and Interrupt
        launch(problem, **params)
        return
    if not SIMULATOR:
        from numba import cuda
        launch(problem, **params)
        done = cuda.event(timing=False)
        done.record()
        start = time.monotonic()
        while not done.query():
            if time.monotonic() - start > seconds:
                raise KernelTimeout(
                    f"your kernel did not finish in {seconds} s: a loop that never ends, or threads waiting for "
                    f"each other (a barrier some threads never reach, a wait on a barrier that never completes)? "
                    f"The GPU is still running it: restart the notebook's kernel (Kernel > Restart)")
            time.sleep(0.001)
        return
    from numba.cuda.simulator import kernel as simulated
    if simulated._kernel_context is not None:      # the simulator runs one kernel at a time
        raise KernelTimeout("a kernel launched earlier is still running in the simulator (it never finished), and "
                            "the simulator runs one kernel at a time: restart the notebook's kernel "
                            "(Kernel > Restart) and fix the endless loop first")
    outcome = {}

    def work():
        try:
            launch(problem, **params)
        except BaseException as e:  # handed to the waiting thread
            outcome["error"] = e
    worker = threading.Thread(target=work, daemon=True, name="cudabook-launch")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise KernelTimeout(
            f"your kernel did not finish in {seconds} s in the simulator: a loop that never ends, or a warp "
            f"waiting for lanes that left (a shuffle or barrier after some threads returned)? Its simulated "
            f"threads are still spinning: restart the notebook's kernel (Kernel > Restart)")
    if "error" in outcome:
        raise outcome["error"]


def check_case(track, launch, inputs, *, rerun=True, time_limit=None, judge=None, **params):
    """Upload `inputs`, poison the output, run `launch(problem, **params)` within a time limit and judge the
    result (with `judge`, the stage's: track.judge_of; the track's by default). A wrong result is produced a
    second time (rerun=True): if the two differ, the verdict says it is a race."""
    import numpy as np
    track = get(track)
    with watched(FIRST_LAUNCH):
        problem = track.upload(*inputs)
        problem.poison()
        launch_within(launch, problem, time_limit, **params)
        first = problem.result()
    verdict = (judge or track.judge)(first, *inputs)
    if not verdict.ok:
        problem.poison()                   # what an element nobody wrote holds (read only when something failed)
        verdict.unwritten = _still_poisoned(first, problem.result())
    if not verdict.ok and rerun:
        problem.poison()
        launch_within(launch, problem, time_limit, **params)
        again = problem.result()
        if not np.array_equal(np.asarray(first).view(np.uint16), np.asarray(again).view(np.uint16)):
            lines = [line for line in verdict.message.split("\n") if not line.startswith("Hint: ")]
            verdict.message = "\n".join(lines + ["Hint: " + RACE_HINT])   # the one hint that is certain
    return verdict


def _still_poisoned(result, poisoned) -> int | None:
    """How many elements of `result` hold, bit for bit, what the poisoned output held before the launch (None
    when the two cannot be compared element by element)."""
    import numpy as np
    a, b = np.ascontiguousarray(result), np.ascontiguousarray(poisoned)
    if a.shape != b.shape or a.dtype != b.dtype or a.size == 0:
        return None
    same = a.view(np.uint8).reshape(a.size, -1) == b.view(np.uint8).reshape(b.size, -1)
    return int(same.all(axis=1).sum())
