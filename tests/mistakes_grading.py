"""Planted mistakes through the grader, for one track at a time: each track's test file
(tests/<track>/test_<track>_mistakes.py) makes its tests here, so that a test run spreads the tracks over its
workers. Every track's planted mistakes (cudabook/<track>/mistakes.py: MISTAKES), as edits of the real lab
kernels, run through the grader itself: each must FAIL (or be reported as an error), never PASS, and its message
must say what its record expects (cudabook.mistakes.Mistake says how: the phrases, on which machines, and the
hints that would name a cause the data rules out). A mistake only the checker catches is run by the track's
checker test; every table's edits must still apply to the lab they edit, on any machine.
"""
import importlib
import pathlib
import shutil
import subprocess
import sys

import pytest

from corpus.mutate import mutant
from cudabook import SIMULATOR, labs, notebooks, track

HOST_CXX = bool(shutil.which("g++") or shutil.which("clang++") or shutil.which("c++"))
ROOT = pathlib.Path(__file__).resolve().parents[1]


def table(name):
    return importlib.import_module(f"cudabook.{name}.mistakes").MISTAKES


def _params(tracks, graded=True):
    out = []
    for name in tracks:
        for m in table(name):
            if graded and m.where == "checker":
                continue
            marks = [pytest.mark.gpu, pytest.mark.hopper] if graded and m.where == "hopper" else []
            out.append(pytest.param(name, m, id=f"{name}-{m.id}", marks=marks))
    return out


def region(module) -> str:
    """A C++ lab's solution region (its lines between the lab markers)."""
    return notebooks.strip_markers(notebooks.region_source(str(module.SOURCE.relative_to(notebooks.PACKAGE)),
                                                           getattr(module, "LAB_TAG", None)))


def wrong_attempt(name, m):
    """The lab's solution with the mistake in it: a Numba lab's kernel function, or a C++ lab's region text."""
    module = track.get(name).stage(m.stage)
    if m.kernel:
        names = {n: getattr(importlib.import_module(where), n) for n, where in m.names}
        helpers = {n: mutant(module.__name__, n, edits) for n, edits in m.helpers}
        return mutant(module.__name__, m.kernel, m.edits, **names, **helpers)
    text = region(module)
    for old, new in m.edits:
        assert old in text, f"the planted mistake '{m.what}' no longer applies to {m.stage}'s lab region"
        text = text.replace(old, new) if m.every else text.replace(old, new, 1)
    return text


def _grade_elsewhere(name, m):
    """Grade in a fresh process, which rebuilds the same wrong attempt from the track's table: a kernel that traps
    or faults (an illegal address) leaves its process's CUDA context unusable, and with it every later test of
    that worker. A mistake only the emulator shows is graded as a learner's would be on this GPU: the GPU's run
    passes, and the grader's own run in the CPU emulator (labs._emulated_in_child) must fail it."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); "
            "from mistakes_grading import table, wrong_attempt; from cudabook import labs; "
            f"m = next(x for x in table({name!r}) if x.id == {m.id!r}); "
            f"ok = labs.grade(m.stage, wrong_attempt({name!r}, m), track={name!r}); "
            "raise SystemExit(0 if ok else 3)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    return done.returncode == 0, done.stdout + done.stderr[-2000:]


def _alternatives(says):
    return [a for s in says for a in (s if isinstance(s, tuple) else (s,))]


def grader_fails(name, m, capsys, monkeypatch, tmp_path):
    t = track.get(name)
    if m.where == "sim" and not SIMULATOR:
        pytest.skip(m.why)
    if m.where == "hopper" and t.unavailable(m.stage):
        pytest.skip(t.unavailable(m.stage))
    if m.kernel is None and (SIMULATOR or m.where == "emulator") and not HOST_CXX:
        pytest.skip("the emulator needs a host C++ compiler")
    if m.cases_sim and SIMULATOR:
        monkeypatch.setattr(t.checking, "_CASES_SIM", list(m.cases_sim))
        if hasattr(t.checking, "_CASES_SIM_BY_STAGE"):          # per-stage cases give way to the mistake's too
            monkeypatch.setattr(t.checking, "_CASES_SIM_BY_STAGE", {})
    wrong = wrong_attempt(name, m)
    if m.where == "hopper" or not SIMULATOR:                            # any lab on a GPU
        ok, out = _grade_elsewhere(name, m)
    else:
        ok, out = labs.grade(m.stage, wrong, track=name), capsys.readouterr().out
    print(f"--- {name} {m.stage}: {m.what}\n{out}")     # the messages, for whoever reads the log (pytest -s)
    assert not ok, f"{m.stage}: '{m.what}' passed the grader"
    if m.fails:
        assert any(f in out for f in m.fails), out
    if not SIMULATOR and not m.gpu_says:
        return                        # the GPU's cases and failure modes differ: only the verdict is pinned there
    for s in m.says:
        assert any(a in out for a in (s if isinstance(s, tuple) else (s,))), \
            f"{m.stage}: '{m.what}': the message does not point at the mistake (it lacks {s!r}):\n{out}"
    expected = _alternatives(m.says)
    hints = [line for line in out.split("\n") if line.startswith("Hint: ") and not any(s in line for s in expected)]
    named = [h for h in m.rules_out if any(h in line for line in hints)]
    assert not named, f"{m.stage}: '{m.what}': the message names a cause the data rules out {named}:\n{out}"


def still_applies(name, m):
    """Each edit is found in the lab it edits (the graded test of a mistake may skip on this machine)."""
    assert wrong_attempt(name, m) is not None


def planted_mistake_tests(name):
    """The two tests of track `name`'s planted mistakes, parametrized over its table."""
    @pytest.mark.parametrize("name, m", _params([name]))
    def test_the_grader_fails_a_planted_mistake(name, m, capsys, monkeypatch, tmp_path):
        grader_fails(name, m, capsys, monkeypatch, tmp_path)

    @pytest.mark.parametrize("name, m", _params([name], graded=False))
    def test_every_planted_mistake_still_applies(name, m):
        still_applies(name, m)
    return test_the_grader_fails_a_planted_mistake, test_every_planted_mistake_still_applies
