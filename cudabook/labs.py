"""The lab grader: runs a learner's kernel with the stage's own launch, on fresh inputs, and says what is wrong.

    grade("01_naive", globals().get("resample_naive"))     # a Numba kernel
    grade("06_cp_async", PIPELINE)                         # CUDA C++: the text of the lab region

For the CUDA C++ stages (06, 07) a learner writes only the lab region; `splice` puts it back into the stage's
.cu file in place of the region, and the stage compiles and launches that whole source. Without a GPU that can
run the stage, the grader compiles it for sm_90a and says what the machine lacks.
"""
from __future__ import annotations

import pathlib

import numpy as np

from . import SIMULATOR, check, notebooks
from . import resample as _resample

# (name, B, S, T, D, sorted): small in the simulator, larger on a GPU; the edge cases are in both.
_CASES_SIM = [("random, sorted targets", 2, 19, 24, 5, True),
              ("random, unsorted targets", 2, 19, 24, 5, False),
              ("S = 2, D = 1", 1, 2, 20, 1, True),
              ("odd D, one batch row", 1, 23, 20, 7, False)]
_CASES_GPU = [("random, sorted targets", 8, 1000, 3000, 256, True),
              ("random, unsorted targets", 8, 1000, 3000, 129, False),
              ("S = 2, D = 1", 3, 2, 333, 1, True),
              ("odd D, one batch row", 1, 777, 1500, 37, False)]


def cases(stage_name=None):
    """The grader's cases; a stage whose lab kernel needs D a multiple of k (LAB_D_MULTIPLE) gets D rounded up."""
    k = getattr(_resample.stage(stage_name), "LAB_D_MULTIPLE", 1) if stage_name else 1
    return [(name, B, S, T, -(-D // k) * k, is_sorted)
            for name, B, S, T, D, is_sorted in (_CASES_SIM if SIMULATOR else _CASES_GPU)]


def _lab_file(module) -> pathlib.Path:
    """Where a stage's lab region lives: its CUDA C++ source (SOURCE) or its Python module."""
    return pathlib.Path(getattr(module, "SOURCE", None) or module.__file__)


def hint(stage_name) -> str:
    module = _resample.stage(stage_name)
    found = notebooks.lab_hints(_lab_file(module).read_text())
    return found[0] if found else "write the kernel body"


def splice(stage_name, region: str) -> str:
    """The stage's CUDA C++ source with its lab region replaced by `region` (the learner's lines)."""
    module = _resample.stage(stage_name)
    text = _lab_file(module).read_text()
    marked = notebooks.region_source(str(_lab_file(module).relative_to(notebooks.PACKAGE)))
    return text.replace(marked, region.strip("\n"), 1)


def _unwritten(region: str) -> bool:
    """True when the region holds nothing but comments and blank lines (the lab's TODO)."""
    code = [line.split("//", 1)[0].strip() for line in region.split("\n")]
    return not any(code)


def _grade_cuda(stage_name, region, say, params) -> bool | None:
    """The C++ checks before any launch: None to go on and run the cases, else the verdict."""
    module = _resample.stage(stage_name)
    if _unwritten(region):
        say(f"The lab region is still the TODO. What to write: {hint(stage_name)}.")
        return False
    source = splice(stage_name, region)
    why = _resample.unavailable(stage_name)
    if why:
        try:
            module.compile_cubin(arch="sm_90a", source_text=source)
        except Exception as e:
            say(f"Your code does not compile:\n{e}")
            return False
        say(f"Your code compiles (sm_90a cubin), but this machine cannot run it, so it is not graded: {why}")
        return False
    return None


def grade(stage_name, kernel, *, quiet=False, **params) -> bool:
    """Grade a learner's kernel for `stage_name`. Prints PASS or a diagnosis; returns True on PASS."""
    say = (lambda *a: None) if quiet else print
    module = _resample.stage(stage_name)
    if kernel is None:
        say(f"No kernel to grade yet: define the kernel in the cell above and run that cell first.\n"
            f"What to write: {hint(stage_name)}.")
        return False
    if isinstance(kernel, str):            # CUDA C++: the learner's lab region
        early = _grade_cuda(stage_name, kernel, say, params)
        if early is not None:
            return early
        kernel = splice(stage_name, kernel)
    for name, B, S, T, D, is_sorted in cases(stage_name):
        src_times, src_feats, tgt_times = _resample.random_problem(B, S, T, D, sorted_targets=is_sorted)
        try:
            verdict = check.check_on(lambda p: module.launch(p, kernel=kernel, **params),
                                     src_times, src_feats, tgt_times)
        except Exception as e:  # the learner's kernel failed to compile or run: explain, don't dump
            if type(e).__name__ == "CompileError":
                say(f"Your code does not compile:\n{e}")
                return False
            say(f"Your kernel raised an error on the case '{name}' (B={B}, S={S}, T={T}, D={D}):\n"
                f"  {type(e).__name__}: {_first_line(e)}\n"
                f"Fix that first; the full traceback appears if you call the kernel directly.")
            if not SIMULATOR:
                say("On a GPU an illegal memory access leaves the CUDA context unusable for this process: "
                    "restart the notebook's kernel (Kernel > Restart) before you try again.")
            return False
        if not verdict.ok:
            say(f"Case '{name}':\n{verdict}")
            if verdict.nan == verdict.total:
                say(f"It looks like the kernel body is still the TODO. What to write: {hint(stage_name)}.")
            return False
    say(f"PASS: {stage_name} is correct on {len(cases(stage_name))} fresh random cases: "
        + "; ".join(f"{name} (B={B}, S={S}, T={T}, D={D})" for name, B, S, T, D, _ in cases(stage_name)))
    return True


def _first_line(e):
    text = str(e).strip().split("\n")
    return text[-1] if text else ""


def demo_size():
    """Sizes the lessons use: small in the simulator, benchmark-sized on a GPU."""
    from .bench import BENCH_SIZE
    return dict(B=2, S=24, T=20, D=8) if SIMULATOR else dict(BENCH_SIZE)
