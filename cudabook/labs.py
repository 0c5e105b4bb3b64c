"""The lab grader: runs a learner's kernel with the stage's own launch, on fresh inputs, and says what is wrong.

    grade("02_smem_tiles", gemm_tiled, track="gemm")             # a Numba kernel; any track: the grader names none
    grade("06_cp_async", PIPELINE, track="resample")             # CUDA C++: the text of the lab region
    cudabook.gemm.grade("02_smem_tiles", gemm_tiled)             # the same, bound to its track (what labs call)

A call without a track is an error that lists the tracks.

For the CUDA C++ stages a learner writes only the lab region; `splice` puts it back into the stage's .cu file
in place of the region, and the stage compiles and launches that whole source. Without a GPU that can run the
stage, the grader compiles it for sm_90a and says what the machine lacks. On every machine, what the compiler
says is read too: a stage lists the compiler messages that betray a mistake (COMPILE_LOG_MISTAKES), such as
ptxas having to insert a wgmma wait the learner left out, which no test run would show; and a stage may list
mistakes visible in the text itself (LAB_TEXT_MISTAKES) that a GPU almost never shows, such as a race at the
end of a pipeline. LAB_TEXT_HINTS, (test of the region's code, hint) pairs, add a hint to a failed case when the
text shows a likely cause that the wrong outputs alone do not name.

On a GPU, a lab the GPU passes is graded once more where a race cannot hide, in a child process started in the
simulator: a C++ lab in the CPU emulator (the copies landing as late and as early as the waits allow), a Numba lab
in Numba's simulator (every shared-memory access checked against the barriers, cudabook.simrace). A mistake only
that run shows fails, and the verdict says which run found it. That run starts with the GPU's own (a learner waits
for the longer of the two) and is stopped unread when the GPU's answer is already wrong.

The cases come from the track (`grading_cases`): fresh random inputs, small in the simulator and larger on a
GPU, edge cases in both; the verdict from the track's `judge` (float64 reference, the arithmetic's tolerance).
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import warnings

from . import SIMULATOR, check, gpucompile, notebooks, nvrtc, progress
from . import track as _track

def cases(stage_name=None, track=None):
    """The grader's cases for a stage: [(name, inputs, label)], fresh random inputs each call."""
    return _track.get(track).grading_cases(stage_name)


def _lab_file(module) -> pathlib.Path:
    """Where a stage's lab region lives: its CUDA C++ source (SOURCE) or its Python module."""
    return pathlib.Path(getattr(module, "SOURCE", None) or module.__file__)


def hint(stage_name, track=None) -> str:
    module = _track.get(track).stage(stage_name)
    found = notebooks.lab_hints(_lab_file(module).read_text(), getattr(module, "LAB_TAG", None))
    return found[0] if found else "write the kernel body"


def splice(stage_name, region: str, track=None) -> str:
    """The stage's CUDA C++ source with its lab region replaced by `region` (the learner's lines)."""
    module = _track.get(track).stage(stage_name)
    text = _lab_file(module).read_text()
    marked = notebooks.region_source(str(_lab_file(module).relative_to(notebooks.PACKAGE)),
                                     getattr(module, "LAB_TAG", None))
    return text.replace(marked, region.strip("\n"), 1)


def _unwritten(region: str) -> bool:
    """True when the region holds nothing but comments and blank lines (the lab's TODO)."""
    code = [line.split("//", 1)[0].strip() for line in region.split("\n")]
    return not any(code)


def _grade_cuda(stage_name, region, say, track, params) -> bool | None:
    """The C++ checks before any launch: None to go on and run the cases, else the verdict."""
    t = _track.get(track)
    module = t.stage(stage_name)
    if _unwritten(region):
        say(f"The lab region is still the TODO. What to write: {hint(stage_name, track)}.")
        return False
    code = "\n".join(line.split("//", 1)[0] for line in region.split("\n"))
    for pattern, mistake in getattr(module, "LAB_TEXT_MISTAKES", ()):
        if re.search(pattern, code, re.S):
            say(f"Not graded yet: {mistake}")
            return False
    source = splice(stage_name, region, track)
    try:
        cubin = module.compile_cubin(arch="sm_90a", source_text=source)
    except Exception as e:
        say(f"Your code does not compile:\n{your_lines(str(e), source, region)}")
        return False
    log = nvrtc.compile_log(cubin)
    for pattern, mistake in getattr(module, "COMPILE_LOG_MISTAKES", ()):
        if re.search(pattern, log):
            say(f"Your code compiles, but the compiler had to step in:\n  {_log_line(log, pattern)}\n{mistake}")
            return False
    why = t.unavailable(stage_name)
    if why and not getattr(module, "EMULATED", False):
        say(f"Your code compiles (sm_90a cubin), but this machine cannot run it, so it is not graded: "
            f"{why.rstrip('.')}. (The grader's CPU emulator does not run this stage: a GPU that does grades it.)")
        return False
    if why and not SIMULATOR:      # a GPU that cannot run this stage: the CPU emulator grades it instead
        say(f"Your code compiles (sm_90a cubin), but this GPU cannot run it: {why.rstrip('.')}. So the CPU "
            f"emulator grades it.")
        verdict = _emulated_in_child(t, stage_name, region, params, say)
        return verdict if verdict is not None else False
    return None


def your_lines(message: str, source: str, region: str) -> str:
    """A compiler message about the spliced source, with each line of the learner's region also numbered as in
    their cell: "cp_async.cu:214: error" becomes "cp_async.cu:214 (your line 2): error"."""
    body = region.strip("\n")
    at = source.find(body)
    if at < 0:
        return message
    first = source.count("\n", 0, at) + 1
    last = first + body.count("\n")

    def mark(m):
        line = int(m.group(2))
        return m.group(0) if not first <= line <= last else f"{m.group(1)}:{line} (your line {line - first + 1}):"
    return re.sub(r"([\w.]+\.cuh?):(\d+):", mark, message)


def _log_line(log, pattern):
    return next((line.strip() for line in log.splitlines() if re.search(pattern, line)), pattern)


def grade(stage_name, kernel, *, track=None, quiet=False, **params) -> bool:
    """Grade a learner's kernel for `stage_name` of `track`. Prints PASS or a diagnosis; returns True on PASS."""
    say = (lambda *a: None) if quiet else print
    t = _track.get(track)
    module = t.stage(stage_name)
    if kernel is None:
        say(f"No kernel to grade yet: define the kernel in the cell above and run that cell first.\n"
            f"What to write: {hint(stage_name, track)}.")
        return False
    _run_cases.region = kernel if isinstance(kernel, str) else None
    beat = progress.Progress() if not quiet else None     # a grade that lasts says which case it is at, every 5 s
    _run_cases.note = beat.note if beat else None
    if beat:
        beat.note(f"grading {stage_name}")
    with beat.heartbeat() if beat else progress.quiet():     # quiet: no check inside says it lasts either
        try:
            with warnings.catch_warnings():
                # NumPy's "divide by zero encountered in scalar divide" and the like, from a wrong kernel's
                # arithmetic in the simulator (where every operation is NumPy's): the verdict says what is wrong
                warnings.filterwarnings("ignore", message=r".* encountered in ", category=RuntimeWarning)
                return _grade(t, module, stage_name, kernel, track, params, say)
        finally:
            _run_cases.note = None


def _grade(t, module, stage_name, kernel, track, params, say) -> bool:
    """grade's work, once the kernel is there."""
    if isinstance(kernel, str):            # CUDA C++: the learner's lab region
        early = _grade_cuda(stage_name, kernel, say, track, params)
        if early is not None:
            return early
        kernel = splice(stage_name, kernel, track)
        if t.unavailable(stage_name):      # no GPU that runs it: emulated on the CPU (cudabook.emulate)
            return _grade_emulated(t, module, stage_name, kernel, track, params, say)
        region = _run_cases.region
    # On a GPU the run where a race cannot hide starts now, in child processes, while the GPU runs the cases: a
    # learner waits for the longer of the two, not for both. It is stopped if the GPU's answer is already wrong.
    notes, second = [], None
    if not SIMULATOR and (not isinstance(kernel, str) or getattr(module, "EMULATED", False)):
        second = (_start_child(t, stage_name, {"region": region}, params, notes.append, "by the CPU emulator")
                  if isinstance(kernel, str) else _start_simulated(t, stage_name, kernel, params, notes.append))
    right = False
    try:
        with (gpucompile.recording() if SIMULATOR and not isinstance(kernel, str) else contextlib.nullcontext({})) \
                as launches:
            if not _run_cases(t, module, stage_name, kernel, track, params, say):
                return False
            graded, right = _run_cases.graded, True
    finally:
        if second is not None and not right:
            second.stop()                  # the GPU's cases failed (or raised): the second run has nothing to add
    compiled = False
    if SIMULATOR and not isinstance(kernel, str):
        fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
        name = getattr(fn, "__name__", None)
        if _run_cases.note:
            _run_cases.note("compiling it for a GPU, as Numba would there")
        try:
            problem = gpucompile.compile_for_gpu(kernel, module.__name__, launches.get(name),
                                                 control=name if hasattr(module, name or "") else None)
            compiled = not problem
        except gpucompile.CannotCheck as e:
            problem = None
            say(f"(Not compiled for a GPU here: {e}.)")
        if problem:
            say("Your kernel gives the right answers in the simulator, which runs it as plain Python, but Numba "
                "cannot compile it for a GPU:\n" + problem)
            return False
    also = ""
    if second is not None:
        # the GPU's answer is right; a race it happened not to show still fails where every access is checked
        if second.running():             # said, so the wait for it is not a silent one
            there = "in the CPU emulator" if isinstance(kernel, str) else "in Numba's simulator"
            say(f"Right on the GPU ({len(graded)} cases); now waiting for the same cases {there} …")
            if _run_cases.note:
                _run_cases.note(f"waiting for the cases {there}")
        again = second.verdict()
        if isinstance(kernel, str):
            where = "by the CPU emulator, where copies land as late and as early as your waits allow"
            agrees = "the CPU emulator agrees, with the copies landing as late and as early as your waits allow"
        else:
            where = "in Numba's simulator, which checks every shared-memory access against the barriers"
            agrees = "Numba's simulator agrees, every shared-memory access checked against the barriers"
        if again is False:
            say(f"On this GPU your kernel gives the right answer on every case ({len(graded)} fresh random cases), "
                f"but run {where}, it does not. The GPU happened not to show the mistake; another run, size or GPU "
                f"would. The verdict there:")
            for note in notes:
                say("  " + note.replace("\n", "\n  "))
            return False
        also = f"; and {agrees}" if again else "; (" + " ".join(notes).strip() + ")"
    say(f"PASS: {stage_name} is correct on {len(graded)} fresh random cases: "
        + "; ".join(f"{name} ({label})" for name, _, label in graded)
        + ("; and it compiles for a GPU (sm_90)" if compiled else "") + also)
    return True


def _simulated_in_child(t, stage_name, kernel, params, say) -> bool | None:
    """Grade a Numba kernel in the simulator from a process that has a GPU: its source, run in a child process
    started in the simulator, in the namespace of the stage's module (the helpers a lab kernel calls). True or
    False: the simulator's verdict (its lines said); None: it could not be run there (why said)."""
    return _start_simulated(t, stage_name, kernel, params, say).verdict()


def _start_simulated(t, stage_name, kernel, params, say) -> "_ChildRun":
    """_simulated_in_child, started: its verdict() waits for it."""
    import inspect
    import textwrap
    fn = getattr(kernel, "py_func", None) or kernel
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as e:
        say(f"not also run in the simulator: the kernel's source cannot be read ({e})")
        return _ChildRun.settled(None)
    return _start_child(t, stage_name, {"source": source, "name": fn.__name__}, params, say, "in the simulator")


def child_parts() -> int:
    """How many child processes share the grading cases of a run in the simulator or the emulator from a GPU
    machine: CUDABOOK_CHILD_PARTS, else one per two cores, at most 4 (a GPU node has cores to spare; the
    simulator's run of every case one after another was most of a Numba lab's grading time there)."""
    named = os.environ.get("CUDABOOK_CHILD_PARTS", "").strip()
    if named:
        try:
            return max(1, int(named))
        except ValueError:
            raise ValueError(f"CUDABOOK_CHILD_PARTS must be a whole number of processes, got {named!r}") from None
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def _in_child(t, stage_name, job, params, say, where) -> bool | None:
    """Grade `job` in child processes started in the simulator, child_parts() of them at once, each taking every
    parts-th case: True when every part passes; False when one fails (the lowest part's lines said); None when
    none failed and one could not be graded (why said)."""
    return _start_child(t, stage_name, job, params, say, where).verdict()


def _start_child(t, stage_name, job, params, say, where) -> "_ChildRun":
    """_in_child, started: the child processes run while the caller goes on; verdict() waits for them."""
    parts = child_parts()
    try:
        payloads = [json.dumps({"track": t.NAME, "stage": stage_name, "params": params, **job, "part": i,
                                "parts": parts}) for i in range(parts)]
    except TypeError:
        say(f"not also run {where}: a launch parameter is not plain data ({sorted(params)})")
        return _ChildRun.settled(None)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDABOOK_SET_CUDASIM")}
    env.update(CUDABOOK_SIMULATOR="1", CUDA_VISIBLE_DEVICES="")
    return _ChildRun(payloads, env, say, where)


class _ChildRun:
    """The child processes of one second run (python -m cudabook.labs --in-child, one job each on stdin).
    verdict(): wait for them (EMULATED_CHILD_TIMEOUT_S from their start at most) and read their verdict, as
    _in_child describes; stop(): end them unread."""

    def __init__(self, payloads, env, say, where):
        import threading
        self.say, self.where, self.waited, self._result = say, where, False, None
        self._started = time.monotonic()
        self._procs = [subprocess.Popen([sys.executable, "-m", "cudabook.labs", "--in-child"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                       for _ in payloads]
        self._out = [None] * len(payloads)

        def talk(i, proc, payload):      # feed and drain each child beside the caller: a full pipe never stalls it
            try:
                self._out[i] = proc.communicate(payload)
            except (OSError, ValueError):
                self._out[i] = None
        self._talkers = [threading.Thread(target=talk, args=(i, p, payload), daemon=True)
                         for i, (p, payload) in enumerate(zip(self._procs, payloads))]
        for th in self._talkers:
            th.start()

    @classmethod
    def settled(cls, result):
        """A run that was never started: its verdict is `result` (its reason already said)."""
        run = cls.__new__(cls)
        run.waited, run._result, run._procs = True, result, []
        return run

    def running(self) -> bool:
        """Whether a child process is still at work (its verdict would be waited for): a talker thread still
        feeding or draining it (Popen.poll() would say None for a child that has exited while its talker holds
        the wait)."""
        return not self.waited and any(th.is_alive() for th in self._talkers)

    def stop(self):
        if self.waited:
            return
        for p in self._procs:
            if p.poll() is None:
                p.kill()
        for p in self._procs:
            p.wait()
        self.waited = True

    def verdict(self) -> bool | None:
        if self.waited:
            return self._result
        timed_out = False
        for th in self._talkers:
            th.join(max(0.0, EMULATED_CHILD_TIMEOUT_S - (time.monotonic() - self._started)))
            timed_out |= th.is_alive()
        if timed_out:
            self.stop()
            for th in self._talkers:
                th.join()
        self.waited = True
        done = [None if out is None or p.returncode is None or (timed_out and p.returncode < 0)
                else (p.returncode, (out[0] or "").strip("\n"), out[1] or "")
                for p, out in zip(self._procs, self._out)]
        self._result = self._read(done)
        return self._result

    def _read(self, done) -> bool | None:
        say, where = self.say, self.where
        failed = [d[1] for d in done if d is not None and d[0] == FAILED]
        if failed:                   # a part that failed is the verdict, whatever another part did
            say(failed[0])
            return False
        if any(d is None for d in done):
            say(f"not also run {where}: it took more than {EMULATED_CHILD_TIMEOUT_S} s")
            return None
        if all(code == PASSED for code, _, _ in done):
            return True
        code, lines, err = next(d for d in done if d[0] != PASSED)
        reason = (lines.splitlines() or err.strip().splitlines() or [f"exit status {code}"])[-1]
        say(f"not also run {where}: {reason}")
        return None


EMULATED_CHILD_TIMEOUT_S = 180
_CHILD_PART = (0, 1)      # (part, parts): the grading cases this process runs (a child: set from its job)
PASSED, FAILED, NOT_GRADED = 0, 3, 4     # the child's exit status (1 would be a Python error of its own)


def _emulated_in_child(t, stage_name, region, params, say) -> bool | None:
    """Grade a C++ lab region in the CPU emulator from a process that has a GPU: in a child process started in the
    simulator (the emulator runs kernels on host memory, which a process holding the GPU does not give its arrays).
    True or False: the emulator's verdict (its lines said); None: it could not grade here (why said)."""
    return _in_child(t, stage_name, {"region": region}, params, say, "by the CPU emulator")


def _child_main():
    """The child of _in_child: grade what stdin holds (a C++ lab region, in the emulator; or a Numba kernel's
    source, in the simulator); exit PASSED, FAILED, or NOT_GRADED when it could not be graded here (the last line
    says why)."""
    global _CHILD_PART
    job = json.loads(sys.stdin.read())
    _CHILD_PART = (int(job.get("part", 0)), int(job.get("parts", 1)))
    t = _track.get(job["track"])
    if not SIMULATOR:
        print("the child process did not start in the simulator")
        sys.exit(NOT_GRADED)
    lines = []
    module = t.stage(job["stage"])
    if "source" in job:
        namespace = dict(vars(module))
        try:
            exec(compile(job["source"], "<your kernel>", "exec"), namespace)
            kernel = namespace[job["name"]]
        except Exception as e:
            print(f"its source does not run on its own here ({type(e).__name__}: {e})")
            sys.exit(NOT_GRADED)
        ok = _run_cases(t, module, job["stage"], kernel, t.NAME, job["params"], lines.append)
    else:
        if not getattr(module, "EMULATED", False):
            print(f"the emulator does not model the instructions stage {job['stage']} uses")
            sys.exit(NOT_GRADED)
        source = splice(job["stage"], job["region"], t.NAME)
        ok = _grade_emulated(t, module, job["stage"], source, t.NAME, job["params"], lines.append)
        failed = getattr(_run_cases, "failed", None) or ("",)
        if not ok and failed[0] in ("cannot emulate", "no host compiler"):
            print(failed[1])
            sys.exit(NOT_GRADED)
    print("\n".join(lines))
    sys.exit(PASSED if ok else FAILED)


LATE = ("copies landing at the last moment your waits allow (a cp.async group when its thread waits for it, a "
        "TMA box when a thread waits on its barrier and every arrival is in), and shared memory starting as NaN "
        "(and the bytes just before each array)")
BEFORE_THE_START = "the bytes just before each array hold NaN: an index before an array's start reads NaN"
EARLY = ("copies landing the moment they are issued (as early as a GPU could), and each thread running as far "
         "ahead of the later ones as your barriers allow")
TIMING = ("With the copies landing at once the result is right; landing as late as your waits allow, it is wrong. "
          "So what is copied is right, and WHEN it is read is not: a thread reads a stage before the copies into "
          "it are waited for: a wait one group too shallow (cp.async.wait_group N leaves the N newest groups in "
          "flight), a wait on the wrong phase parity, or a missing __syncthreads between the wait and reads of "
          "rows other threads copied.")
LATE_AHEAD = ("copies landing at the last moment your waits allow, and each thread running as far ahead of the "
              "later ones as your barriers allow (a warp reads before the others have waited for their copies)")
AHEAD = ("With the threads in step the result is right; with a warp running ahead of the others as far as your "
         "barriers allow, it is wrong: it reads rows that other threads copied before they waited for their copies "
         "(cp.async.wait_group waits for the calling thread's own groups only). Only a barrier that every thread "
         "of the block reaches after its wait, __syncthreads, orders them before anyone reads; __syncwarp orders "
         "one warp.")
REFILL = ("With the copies landing late the result is right; landing at once, it is wrong: a stage is refilled "
          "while other threads may still read it (a barrier missing before the refill).")


def _grade_emulated(t, module, stage_name, source, track, params, say) -> bool:
    """Grade a C++ stage on the CPU (cudabook.emulate): every case with the copies landing as late as the
    program's waits allow, then as early as they could; a case wrong one way only is a timing mistake, and the
    message says which kind."""
    from . import emulate
    graded = []
    copies = getattr(module, "ASYNC_COPIES", True)     # a kernel without asynchronous copies: one way is enough
    # (landing, ahead: the third way, lazy landing with the warps run ahead; "eager" runs them ahead anyway)
    ways = [("lazy", False, LATE), ("eager", False, EARLY)] if copies else [("eager", False, None)]
    if copies and re.search(r"\bcp_async_wait<", source):     # cp.async groups: each thread waits for its own
        ways.append(("lazy", True, LATE_AHEAD))
    for landing, ahead, meaning in ways:
        notes = []
        try:
            with emulate.emulating(landing, timeout_s=WATCHDOG_EMULATED_S, ahead=ahead):
                # (the third way, warps run ahead, at the first grading variant only: it is there for an order
                # between warps, which the ring's depth does not change; every variant of it doubled GEMM 04's time)
                ok = _run_cases(t, module, stage_name, source, track, params, notes.append,
                                first_variant_only=ahead)
        except emulate.HostCompilerMissing as e:
            _run_cases.failed = ("no host compiler", str(e), None)
            say(f"Your code compiles (sm_90a cubin), but it is not graded: {e}")
            return False
        if ok:
            graded = graded or _run_cases.graded       # (the first way's: every case and variant)
            continue
        say(f"Run on the CPU by the emulator, with {meaning}:" if meaning else
            f"Run on the CPU by the emulator ({BEFORE_THE_START}):")
        failed = getattr(_run_cases, "failed", None)
        other_right = False
        if failed and failed[0] == "verdict" and copies:
            _, inputs, variant = failed
            other = "eager" if landing == "lazy" and not ahead else "lazy"     # the third way: in step
            try:                  # the other landing may stop too (a deadlock either way): then it is no timing
                with emulate.emulating(other, timeout_s=WATCHDOG_EMULATED_S):
                    again = check.check_case(t, lambda p: module.launch(p, kernel=source, **{**variant, **params}),
                                              inputs, rerun=False, judge=_track.judge_of(t, stage_name))
                other_right = again.ok
            except Exception:
                other_right = False
        for note in notes:
            if other_right:       # the data's hints would name an indexing cause; the timing is the cause
                note = "\n".join(line for line in note.split("\n") if not line.startswith("Hint: "))
            say(note)
        if other_right:
            say("Hint: " + (AHEAD if ahead else TIMING if landing == "lazy" else REFILL))
        return False
    say(f"PASS: {stage_name} is correct on {len(graded)} fresh random cases, run on the CPU by the emulator"
        + (" with the copies landing as late and as early as your waits allow: " if copies else ": ")
        + "; ".join(f"{name} ({label})" for name, _, label in graded)
        + ". (Speed is measured on a GPU only.)")
    return True


WATCHDOG_EMULATED_S = 30


def grading_variants(module, params) -> list[dict]:
    """The stage's GRADING_VARIANTS as they run under the learner's own parameters, which win: each variant's
    settings as they take effect, and a variant that those parameters make the same launch as an earlier one
    left out (grade("02_smem_tiles", kernel, tile=4) runs its cases once, labelled tile=4)."""
    out, launches = [], []
    for variant in getattr(module, "GRADING_VARIANTS", [{}]):
        launch = {**variant, **params}
        if launch not in launches:
            launches.append(launch)
            out.append({k: launch[k] for k in variant})
    return out


def _run_cases(t, module, stage_name, kernel, track, params, say, first_variant_only=False) -> bool:
    """Every grading case (and variant; with first_variant_only, the first variant's alone); False after saying
    what went wrong. The cases run are kept in _run_cases.graded for the PASS line."""
    graded = _run_cases.graded = []
    _run_cases.failed = None      # ("verdict" or "error", inputs, variant) of the case that failed
    part, parts = _CHILD_PART     # a child grading part of the cases: every parts-th case from the part-th
    flat = -1
    variants = grading_variants(module, params)
    for variant in variants[:1] if first_variant_only else variants:   # e.g. other pipeline depths, where a race shows
        for name, inputs, label in cases(stage_name, track):
            flat += 1
            if flat % parts != part:
                continue
            label = ", ".join([label] + [f"{k}={v}" for k, v in variant.items()])
            graded.append((name, inputs, label))
            if getattr(_run_cases, "note", None):
                _run_cases.note(f"grading: case {len(graded)}, {name} ({label})")
            start = time.monotonic()
            try:
                verdict = check.check_case(t, lambda p: module.launch(p, kernel=kernel, **{**variant, **params}),
                                            inputs, judge=_track.judge_of(t, stage_name))
            except check.KernelTimeout as e:
                say(f"Case '{name}' ({label}): {e}")
                return False
            except Exception as e:  # the learner's kernel failed to compile or run: explain, don't dump
                if type(e).__name__ == "CompileError":
                    region = getattr(_run_cases, "region", None)
                    say(f"Your code does not compile:\n{your_lines(str(e), kernel, region) if region else e}")
                    return False
                if type(e).__name__ == "CannotEmulate":
                    _run_cases.failed = ("cannot emulate", f"the emulator does not model {e}", variant)
                if type(e).__name__ in ("EmulationError", "CannotEmulate"):
                    say(f"Case '{name}' ({label}): the emulated kernel stopped:\n{e}")
                    return False
                say(f"Your kernel raised an error on the case '{name}' ({label}):\n"
                    f"  {type(e).__name__}: {_first_line(e)}")
                watchdog = getattr(module, "WATCHDOG_S", None)
                if watchdog and time.monotonic() - start >= 0.8 * watchdog:
                    say(f"It ran for {time.monotonic() - start:.0f} s before it failed: a wait that never ended, "
                        f"stopped by the kernel's watchdog (it traps after {watchdog} s). A barrier waited with the "
                        f"wrong parity, or it never got the arrivals it counts (a missing arrive, one thread "
                        f"arriving for many, or expect_tx bytes the copies do not deliver).")
                else:
                    say("Fix that first; the full traceback appears if you call the kernel directly.")
                if not SIMULATOR:
                    say("On a GPU a failed kernel leaves the CUDA context unusable for this process: restart the "
                        "notebook's kernel (Kernel > Restart) before you try again.")
                return False
            if not verdict.ok:
                _run_cases.failed = ("verdict", inputs, variant)
                say(f"Case '{name}' ({label}):\n{verdict}")
                region = getattr(_run_cases, "region", None)
                code = "\n".join(line.split("//", 1)[0] for line in (region or "").split("\n"))
                for shows, text in getattr(module, "LAB_TEXT_HINTS", ()) if region else ():
                    if shows(code):
                        say("Hint (from your code): " + text)
                if verdict.nan == verdict.total and verdict.unwritten in (None, verdict.total):
                    say(f"It looks like the kernel body is still the TODO. What to write: {hint(stage_name, track)}.")
                return False
    return True


def _first_line(e):
    text = str(e).strip().split("\n")
    return text[-1] if text else ""


if __name__ == "__main__" and sys.argv[1:] == ["--in-child"]:
    with progress.quiet():                 # its parent reads what it prints: no progress lines among them
        _child_main()
