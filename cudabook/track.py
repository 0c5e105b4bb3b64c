"""What every track has in common.

A track is a package `cudabook/<track>/` (resample, gemm, ...) with the same small face:

    NAME, TITLE                  "gemm", "matrix product (bf16, float32 accumulation)"
    STAGES                       the ladder, in order; stage(name) -> the stage's module
    unavailable(stage)           None, or why this machine cannot run it
    run(stage, *inputs, **p)     NumPy in, NumPy out; reference(*inputs) -> float64
    upload(*inputs)              a problem on the device: poison(), result(), and what launch() reads
    grading_cases(stage)         [(case name, inputs tuple, label)]: fresh random inputs, small in the
                                 simulator, larger on a GPU
    judge(got, *inputs)          a Verdict against the float64 reference with the track's tolerance
    bench                        the benchmark workloads, peers and the columns of its table (see results.py)

A stage module has NAME, TITLE, PARAMS and launch(problem, kernel=None, **params); C++ stages also SOURCE (their
.cu file, where the lab region lives) and compile_cubin(arch=..., source_text=...). The checker (`check_case`),
the lab grader (cudabook.labs), the benchmark and its records (cudabook.results) take a track and name none.
"""
from __future__ import annotations

import importlib


class StageUnavailable(RuntimeError):
    """This machine cannot run the stage; the message says what it needs and what the machine has."""


TRACKS = ("resample", "gemm", "msda", "attention")


class Ladder:
    """A track's stages: names in ladder order ("01_naive", ...), each a module of the track's package.

        ladder = Ladder(__name__, {"01_naive": "s01_naive", ...}, "GEMM stage")
        ladder.stages            the names whose modules exist, in order
        ladder.stage(name)       the module, by name ("02_smem_tiles") or number ("02" or 2)
        ladder.unavailable(name) None, or why this machine cannot run it
        ladder.run(name, upload, *inputs, **params)   upload, poison, launch, the result as NumPy
    """

    def __init__(self, package: str, modules: dict, label: str = "stage"):
        import importlib.util
        self.package, self.modules, self.label = package, dict(modules), label
        self.stages = tuple(name for name, module in modules.items()
                            if importlib.util.find_spec(f"{package}.{module}") is not None)

    def stage(self, name):
        if isinstance(name, bool) or not isinstance(name, (str, int)):
            raise ValueError(f"a {self.label} is named by a string such as {self.stages[0]!r} or a number, "
                             f"got {name!r}; the stages are: {', '.join(self.stages)}")
        if isinstance(name, int) or (name.isascii() and name.isdigit()):
            matches = [s for s in self.stages if int(s[:2]) == int(name)]
            name = matches[0] if matches else str(name)
        if name not in self.stages:
            raise ValueError(f"unknown {self.label} {name!r}; the stages are: {', '.join(self.stages)}")
        return importlib.import_module(f"{self.package}.{self.modules[name]}")

    def unavailable(self, name) -> str | None:
        check = getattr(self.stage(name), "unavailable", None)
        return check() if check else None

    def run(self, name, upload, *inputs, **params):
        module = self.stage(name)
        problem = upload(*inputs)               # bad input is named first, even where the stage cannot run
        why = self.unavailable(name)
        if why:
            raise StageUnavailable(why)
        problem.poison()
        module.launch(problem, **params)
        return problem.result()


def check_params(params, allowed):
    """TypeError naming any parameter the stage does not know."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise TypeError(f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                        f"this stage takes: {', '.join(allowed)}")


def check_launch(stage: str, *, threads=None, threads_multiple=1, grid_y=None, **at_least):
    """ValueError naming the parameter and the rule for launch settings no GPU accepts: a block of 1..1024
    threads (a multiple of `threads_multiple`), a grid's y dimension of at most 65,535, and counts that must be
    at least some value (at_least: name=(value, minimum))."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024
                                or threads % threads_multiple):
        extra = f" and a multiple of {threads_multiple}" if threads_multiple > 1 else ""
        raise ValueError(f"{stage}: threads must be an integer in 1..1024{extra} (a block holds at most 1024 "
                         f"threads), got {threads!r}")
    if grid_y is not None and grid_y > 65535:
        raise ValueError(f"{stage}: the grid's y dimension would be {grid_y:,}, and a GPU allows at most 65,535: "
                         f"split the batch into parts of at most 65,535 rows")
    for name, (value, minimum) in at_least.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{stage}: {name} must be an integer >= {minimum}, got {value!r}")


def get(track):
    """A track package by name ("gemm"), or the package itself."""
    if isinstance(track, str):
        if track not in TRACKS:
            raise ValueError(f"unknown track {track!r}; the tracks are: {', '.join(TRACKS)}")
        return importlib.import_module(f"cudabook.{track}")
    return track


RACE_HINT = ("the output differs between two runs on the same inputs: a race (threads reading shared memory "
             "that others are still writing, overwriting a buffer someone still reads: a missing barrier?, or "
             "two threads storing to the same output element: a guard or an index that lets a thread write "
             "past its own share?)")


class KernelTimeout(RuntimeError):
    """A launch did not finish within its time limit (an endless loop, or threads waiting for each other)."""


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


def check_case(track, launch, inputs, *, rerun=True, time_limit=None, **params):
    """Upload `inputs`, poison the output, run `launch(problem, **params)` within a time limit and judge the
    result. A wrong result is produced a second time (rerun=True): if the two differ, the verdict says it is
    a race."""
    import numpy as np
    track = get(track)
    problem = track.upload(*inputs)
    problem.poison()
    launch_within(launch, problem, time_limit, **params)
    first = problem.result()
    verdict = track.judge(first, *inputs)
    if not verdict.ok and rerun:
        problem.poison()
        launch_within(launch, problem, time_limit, **params)
        again = problem.result()
        if not np.array_equal(np.asarray(first).view(np.uint16), np.asarray(again).view(np.uint16)):
            lines = [line for line in verdict.message.split("\n") if not line.startswith("Hint: ")]
            verdict.message = "\n".join(lines + ["Hint: " + RACE_HINT])   # the one hint that is certain
    return verdict
