"""On a GPU machine the grader also runs a C++ lab in the CPU emulator, and a Numba lab in Numba's simulator (whose
shared arrays check every access against the barriers), in a child process that starts in the simulator
(labs._emulated_in_child, labs._simulated_in_child), so that a race the GPU happened not to show still fails. These tests run
that child from here (no GPU needed); the GPU side is run by the planted mistakes marked `only="emulator"` in
each track's table, graded on a GPU by tests/mistakes_grading.py."""
import shutil

import pytest

from cudabook import SIMULATOR, labs, track
from mistakes_grading import region, table, wrong_attempt

pytestmark = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++") or shutil.which("c++")),
                                reason="the emulator needs a host C++ compiler")


def child(track_name, stage, text):
    notes = []
    return labs._emulated_in_child(track.get(track_name), stage, text, {}, notes.append), "\n".join(notes)


def test_the_child_passes_a_right_region():
    verdict, said = child("msda", "04_tma_boxes", region(track.get("msda").stage("04_tma_boxes")))
    assert verdict is True, said


def test_the_child_fails_a_race_with_the_timing_hint():
    late = next(m for m in table("attention") if m.where == "emulator")
    verdict, said = child("attention", "04_mma_cp_async", wrong_attempt("attention", late))
    assert verdict is False
    assert "copies landing at the last moment your waits allow" in said and "WHEN it is read is not" in said
    assert "still the TODO" not in said           # the kernel computed the NaN (check_case counts what it wrote)


@pytest.mark.skipif(not SIMULATOR, reason="the child's code runs in the simulator (here it would say it is not)")
def test_a_stage_the_emulator_does_not_model_is_not_graded_there(monkeypatch, capsys):
    """The child's own answer (run here, in-process) for a stage not marked EMULATED: not graded, and why."""
    import io
    import json
    gemm = track.get("gemm")
    monkeypatch.setattr(gemm.stage("07_clusters"), "EMULATED", False)
    job = {"track": "gemm", "stage": "07_clusters", "region": region(gemm.stage("07_clusters")), "params": {}}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(job)))
    with pytest.raises(SystemExit) as done:
        labs._child_main()
    assert done.value.code == labs.NOT_GRADED
    assert "the emulator does not model" in capsys.readouterr().out


def test_the_simulator_child_passes_a_right_numba_kernel():
    from cudabook.gemm.s02_smem_tiles import gemm_tiled
    notes = []
    assert labs._simulated_in_child(track.get("gemm"), "02_smem_tiles", gemm_tiled, {}, notes.append) is True, notes


def test_the_simulator_child_fails_a_race_a_gpu_may_hide():
    from cudabook.attention.mistakes import MISTAKES
    syncwarp = next(m for m in MISTAKES if "syncwarp" in m.what)
    notes = []
    verdict = labs._simulated_in_child(track.get("attention"), "03_tiled", wrong_attempt("attention", syncwarp), {},
                                       notes.append)
    assert verdict is False and "a race on shared memory" in "\n".join(notes), notes


def test_a_kernel_whose_source_cannot_be_read_is_not_run_there():
    notes = []
    kernel = eval("lambda: None")
    assert labs._simulated_in_child(track.get("gemm"), "02_smem_tiles", kernel, {}, notes.append) is None
    assert "cannot be read" in notes[0]


def _gpu_run_that_passes(monkeypatch):
    """Stand in for a GPU: labs.grade's own run of the cases passes them all, as a GPU that hides a race would."""
    def gpu_run(t, module, stage_name, kernel, track, params, say):
        gpu_run.graded = [("a case", None, "as a GPU ran it")]
        return True
    monkeypatch.setattr(labs, "SIMULATOR", False)
    monkeypatch.setattr(labs, "_run_cases", gpu_run)


def test_on_a_gpu_a_numba_race_the_gpu_hid_fails_in_the_simulator(monkeypatch, capsys):
    from cudabook.attention.mistakes import MISTAKES
    _gpu_run_that_passes(monkeypatch)
    syncwarp = next(m for m in MISTAKES if "syncwarp" in m.what)
    assert not labs.grade("03_tiled", wrong_attempt("attention", syncwarp), track="attention")
    out = capsys.readouterr().out
    assert "On this GPU your kernel gives the right answer" in out and "a race on shared memory" in out, out


def test_on_a_gpu_a_right_numba_kernel_passes_both(monkeypatch, capsys):
    from cudabook.gemm.s02_smem_tiles import gemm_tiled
    _gpu_run_that_passes(monkeypatch)
    assert labs.grade("02_smem_tiles", gemm_tiled, track="gemm")
    assert "and Numba's simulator agrees" in capsys.readouterr().out


def test_on_a_gpu_the_second_run_starts_before_the_gpus_cases(monkeypatch, capsys):
    # a learner waits for the longer of the GPU's cases and the simulator's run, not for both one after the other
    from cudabook.gemm.s02_smem_tiles import gemm_tiled
    events, start = [], labs._start_simulated
    monkeypatch.setattr(labs, "_start_simulated", lambda *a: events.append("second run started") or start(*a))
    _gpu_run_that_passes(monkeypatch)
    gpu_run = labs._run_cases

    def recorded(*a):
        events.append("GPU cases")
        ok = gpu_run(*a)
        recorded.graded = gpu_run.graded
        return ok
    monkeypatch.setattr(labs, "_run_cases", recorded)
    assert labs.grade("02_smem_tiles", gemm_tiled, track="gemm")
    assert events == ["second run started", "GPU cases"]
    assert "and Numba's simulator agrees" in capsys.readouterr().out


def test_on_a_gpu_a_wrong_answer_stops_the_second_run_unread(monkeypatch, capsys):
    from cudabook.gemm.s02_smem_tiles import gemm_tiled
    runs, start = [], labs._start_simulated
    monkeypatch.setattr(labs, "_start_simulated", lambda *a: runs.append(start(*a)) or runs[-1])
    monkeypatch.setattr(labs, "SIMULATOR", False)
    monkeypatch.setattr(labs, "_run_cases", lambda *a: print("case 1: wrong") or False)
    assert not labs.grade("02_smem_tiles", gemm_tiled, track="gemm")
    (run,) = runs
    assert run.waited and run._procs and all(p.returncode is not None for p in run._procs)   # ended, not left
    out = capsys.readouterr().out
    assert "case 1: wrong" in out and "simulator" not in out


def test_child_parts_share_the_cases_each_once(monkeypatch):
    # from a GPU machine the simulator's (or emulator's) run is split over child processes, every parts-th case
    # (and variant) each: together they grade every case exactly once
    import types
    monkeypatch.setattr(labs, "cases", lambda stage, track: [(f"case {i}", i, f"label {i}") for i in range(5)])
    monkeypatch.setattr(labs.check, "check_case", lambda *a, **k: types.SimpleNamespace(ok=True))
    module = types.SimpleNamespace(GRADING_VARIANTS=[{}, {"stages": 3}], launch=None)
    seen = []
    for parts in (1, 3, 4):
        got = []
        for part in range(parts):
            monkeypatch.setattr(labs, "_CHILD_PART", (part, parts))
            assert labs._run_cases(track.get("gemm"), module, "02_smem_tiles", None, "gemm", {}, print)
            got += [label for _, _, label in labs._run_cases.graded]
        seen.append(sorted(got))
    assert seen[0] == seen[1] == seen[2] and len(seen[0]) == 10 and len(set(seen[0])) == 10


def test_child_parts_are_named_or_sized_from_the_cores(monkeypatch):
    monkeypatch.setenv("CUDABOOK_CHILD_PARTS", "3")
    assert labs.child_parts() == 3
    monkeypatch.setenv("CUDABOOK_CHILD_PARTS", "three")
    with pytest.raises(ValueError, match="CUDABOOK_CHILD_PARTS must be a whole number"):
        labs.child_parts()
    monkeypatch.delenv("CUDABOOK_CHILD_PARTS")
    monkeypatch.setattr(labs.os, "cpu_count", lambda: 16)
    assert labs.child_parts() == 4
    monkeypatch.setattr(labs.os, "cpu_count", lambda: 2)
    assert labs.child_parts() == 1


def test_split_over_children_a_race_still_fails_and_a_right_kernel_passes(monkeypatch):
    from cudabook.attention.mistakes import MISTAKES
    from cudabook.gemm.s02_smem_tiles import gemm_tiled
    monkeypatch.setenv("CUDABOOK_CHILD_PARTS", "3")
    syncwarp = next(m for m in MISTAKES if "syncwarp" in m.what)
    notes = []
    verdict = labs._simulated_in_child(track.get("attention"), "03_tiled", wrong_attempt("attention", syncwarp), {},
                                       notes.append)
    assert verdict is False and "a race on shared memory" in "\n".join(notes), notes
    notes = []
    assert labs._simulated_in_child(track.get("gemm"), "02_smem_tiles", gemm_tiled, {}, notes.append) is True, notes
    monkeypatch.setenv("CUDABOOK_CHILD_PARTS", "2")
    late = next(m for m in table("attention") if m.where == "emulator")
    verdict, said = child("attention", "04_mma_cp_async", wrong_attempt("attention", late))
    assert verdict is False and "WHEN it is read is not" in said


def test_the_learners_parameters_win_over_the_grading_variants_and_a_repeat_is_left_out():
    # grade("02_smem_tiles", kernel, tile=4): both passes would launch tile=4, so it runs once, labelled so
    import types
    module = types.SimpleNamespace(GRADING_VARIANTS=[{}, {"tile": 8}])
    assert labs.grading_variants(module, {}) == [{}, {"tile": 8}]
    assert labs.grading_variants(module, {"tile": 4}) == [{}]
    two = types.SimpleNamespace(GRADING_VARIANTS=[{}, {"stages": 3, "unroll": 2}])
    assert labs.grading_variants(two, {"stages": 2}) == [{}, {"stages": 2, "unroll": 2}]
    assert labs.grading_variants(types.SimpleNamespace(), {"x": 1}) == [{}]


def test_a_second_run_still_at_work_says_so_and_a_settled_one_does_not():
    """grade() says it is waiting for the simulator's or the emulator's run only while that run is at work."""
    class Talker:
        def __init__(self, alive):
            self.alive = alive

        def is_alive(self):
            return self.alive
    run = labs._ChildRun.__new__(labs._ChildRun)
    run.waited, run._talkers = False, [Talker(False), Talker(True)]
    assert run.running()
    run._talkers = [Talker(False), Talker(False)]
    assert not run.running()
    run.waited, run._talkers = True, [Talker(True)]
    assert not run.running()
    assert not labs._ChildRun.settled(None).running()
