"""Planted mistakes: the wrong attempts at a lab that its grader is tested to catch, one record each.

Each track keeps ONE table of them, `MISTAKES` in cudabook/<track>/mistakes.py. A mistake is an edit of the
real lab: the stage's own kernel with exact text replacements (`old` -> `new`, each found once), so that when a
stage changes its planted mistakes follow it, and an edit that no longer applies fails loudly. The tests
(tests/machinery/test_lab_mistakes.py) run every table through the grader; the instructor's guide lists them.
"""
from __future__ import annotations

from dataclasses import dataclass

FAILED = ("FAIL", "raised an error")     # what a grader's message says when a kernel is wrong (either one)


@dataclass(frozen=True)
class Mistake:
    """One learner's mistake in the lab of `stage`, and what the grader must say about it.

    stage     the lab's stage name ("05_double_buffered")
    what      what the learner did wrong, in words (the guide's list and the test's id say it)
    edits     ((old, new), ...): the mistake, as edits of the lab region: a Numba lab's kernel function (`kernel`
              names it), else the CUDA C++ lab region (the solution's lines between the lab markers)
    says      the phrases the grader's message must hold, each a string or a tuple of alternatives (any one)
    fails     the message holds one of these (the verdict's words), on every machine
    kernel    a Numba lab: the function the edits mutate; None for a C++ lab region
    helpers   ((device function, edits), ...): the learner's own version of a helper the region calls, with a
              mistake in it (stage 02's 32-way search, say)
    names     ((name, module), ...): names the mutated kernel needs that its module does not import
    only      None (graded on every machine), or "<where>: <why>": "sim" graded only in Numba's simulator, "emulator"
              graded in the CPU emulator (in a child process where a GPU is), "hopper" graded only where the stage
              runs, in a fresh process (a trap ends a CUDA context), "checker" caught by the track's checker
              (its own test), not graded
    gpu_says  also check `says` (and `rules_out`) on a GPU; by default a GPU's cases differ and only the verdict
              is pinned there
    rules_out hints that name a cause: the message may hold none of them but those `says` expects (a cause the
              data rules out must never be named)
    every     each edit replaces every occurrence of `old`, not only the first
    cases_sim the grader's simulator cases replaced by these (name, problem arguments), smaller, for speed
    id        the test's id for it
    """
    stage: str
    what: str
    edits: tuple = ()
    says: tuple = ()
    fails: tuple = FAILED
    kernel: str | None = None
    helpers: tuple = ()
    names: tuple = ()
    only: str | None = None
    gpu_says: bool = False
    rules_out: tuple = ()
    every: bool = False
    cases_sim: tuple = ()
    id: str = ""

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"{self.stage[:2]}-{self.what[:48]}")
        where = (self.only or "").split(":", 1)[0]
        if self.only is not None and where not in ("sim", "emulator", "hopper", "checker"):
            raise ValueError(f"Mistake {self.what!r}: only must start with sim, emulator, hopper or checker: "
                             f"{self.only!r}")

    @property
    def where(self) -> str | None:
        """Where alone it is graded ("sim", "emulator", "hopper", "checker"), or None: everywhere."""
        return self.only.split(":", 1)[0] if self.only else None

    @property
    def why(self) -> str:
        return self.only.split(":", 1)[1].strip() if self.only else ""


def phrases(says) -> tuple:
    """`says` as a tuple of requirements: None -> (), "x" -> ("x",), a tuple of alternatives -> (that tuple,)."""
    if not says:
        return ()
    return (says,)


def listed(mistakes) -> dict[str, list[str]]:
    """{stage: [what, ...]} in the table's order: the lab's planted mistakes as the guide lists them. A mistake
    only the checker catches is listed for a stage that has no graded ones."""
    graded = {m.stage for m in mistakes if m.where != "checker"}
    out: dict[str, list[str]] = {}
    for m in mistakes:
        if m.where != "checker" or m.stage not in graded:
            out.setdefault(m.stage, []).append(m.what)
    return out
