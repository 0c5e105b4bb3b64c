"""The machinery names no track: each track's face (cudabook.kit.ladder.face) and the pieces the machinery reads from it."""
import pytest

from cudabook import labs, lesson, notebooks, results, sizes
from cudabook import track as tracks
from numba import cuda  # noqa: E402  (after cudabook, which picks the simulator)


@pytest.mark.parametrize("name", tracks.TRACKS)
def test_every_track_has_the_common_face_bound_to_itself(name, monkeypatch):
    t = tracks.get(name)
    assert t.NAME == name and t.STAGES and t.stage(1) is t.stage(t.STAGES[0])
    assert t.MAP_TITLE and t.bench.SIZE_PLAN["x"]
    calls = []
    monkeypatch.setattr(labs, "hint", lambda *a, **k: calls.append((a, k)) or "hint")
    monkeypatch.setattr(lesson, "sweep", lambda *a, **k: calls.append((a, k)))
    assert t.hint(t.STAGES[0]) == "hint"
    t.sweep(t.STAGES[0], "threads", [32], fixed={"x": 1})
    assert calls == [((t.STAGES[0],), {"track": name}), ((t.STAGES[0], "threads", [32]), {"fixed": {"x": 1},
                                                                                         "track": name})]


@pytest.mark.parametrize("call", [lambda: labs.grade("01_naive", None), lambda: labs.hint("01_naive"),
                                  lambda: labs.cases("01_naive"), lambda: lesson.ladder_so_far("01_naive"),
                                  lambda: lesson.sweep("01_naive", "threads", [32]), lambda: sizes.plan(None)],
                         ids=["grade", "hint", "cases", "ladder_so_far", "sweep", "sizes.plan"])
def test_a_call_without_a_track_is_an_error_that_lists_the_tracks(call):
    with pytest.raises(TypeError, match="the tracks are: " + ", ".join(tracks.TRACKS)):
        call()


def test_the_map_and_the_images_keep_their_names():
    assert list(notebooks.track_titles()) == ["resample", "gemm", "msda", "attention"]
    record = {"gpu": "NVIDIA H200"}
    assert [results.plot_name(record, t) for t in tracks.TRACKS] == [
        "H200.png", "H200_gemm.png", "H200_msda.png", "H200_attention.png"]


# ------------------------------------------------------------------ a fifth track: its own folders and one name
# A throwaway track (a float32 copy, one Numba rung) written into a temporary folder: the registry gets its name,
# and the grader, the records, the lesson helpers and the notebooks builder serve it with no other edit.
FIFTH = {
    "__init__.py": '''"""A throwaway track: copy a float32 array."""
import numpy as np

from ..kit.ladder import face
from ..verdict import Verdict
from . import benchmark as bench  # noqa: F401

NAME, TITLE, MAP_TITLE = "copy", "copy (float32)", "Copy: the throwaway fifth track"
_LADDER = face(globals(), ("01_naive",), "copy stage")


class Problem:
    def __init__(self, x):
        from numba import cuda
        self.x, self.min_bytes = cuda.to_device(x), 2 * x.nbytes
        self.out = cuda.device_array_like(self.x)

    def poison(self):
        self.out.copy_to_device(np.full(self.out.shape, np.nan, np.float32))

    def result(self):
        return self.out.copy_to_host()


def upload(x):
    return Problem(np.ascontiguousarray(x, np.float32))


def run(stage_name, x, **params):
    return _LADDER.run(stage_name, upload, x, **params)


def grading_cases(stage_name=None):
    rng = np.random.default_rng()
    return [(f"n = {n}", (rng.standard_normal(n).astype(np.float32),), f"n={n}") for n in (1, 300)]


def judge(got, x):
    bad = ~(np.asarray(got) == x)
    nan = int(np.isnan(got).sum())
    message = "correct" if not bad.any() else f"{int(bad.sum())} of {bad.size} wrong ({nan} NaN, never written?)"
    return Verdict(ok=not bad.any(), wrong=int(bad.sum()), total=bad.size, nan=nan, shape=bad.shape, message=message)
''',
    "benchmark.py": '''WORKLOADS = [dict(n=1 << 20)]
COLUMNS = [("µs", "median_us", "{:,.1f}"), ("GB/s", "GBps", "{:,.0f}")]
REQUIRED = ("median_us", "GBps", "correct")
PLOT_KEY, PLOT_LABEL = "GBps", "GB/s"
SIZE_PLAN = dict(x=("n",), values=(1024, 4096), workloads="first")


def workload_name(n):
    return f"copy n={n}"


def summary(ctx):
    return "no yardstick"


def prepare(size, rng=None):
    import numpy as np
    from . import upload
    x = (rng or np.random.default_rng()).standard_normal(size["n"]).astype(np.float32)
    return (x,), upload(x)


def context(problem, progress=print):
    return {}


def metrics(problem, median_us, ctx):
    return {"GBps": round(problem.min_bytes / (median_us * 1e-6) / 1e9, 1)}


def peers(args, problem, ctx, repeats=15, progress=print):
    return {}


def consistency(row, workload, record):
    return None
''',
    "s01_naive.py": '''from numba import cuda

NAME, TITLE, PARAMS = "01_naive", "a thread per element", {"threads": 128}


@cuda.jit
def copy_naive(x, out):
    i = cuda.grid(1)
    # >>> lab: out[i] = x[i], for every i of the array
    if i < x.shape[0]:
        out[i] = x[i]
    # <<< lab


def launch(problem, kernel=None, threads=128):
    n = problem.x.shape[0]
    (kernel or copy_naive)[(n + threads - 1) // threads, threads](problem.x, problem.out)
''',
}


@pytest.fixture
def fifth(tmp_path, monkeypatch):
    import sys

    import cudabook
    folder = tmp_path / "package" / "copy"
    folder.mkdir(parents=True)
    for name, text in FIFTH.items():
        (folder / name).write_text(text)
    monkeypatch.setattr(cudabook, "__path__", [*cudabook.__path__, str(folder.parent)])
    monkeypatch.setattr(tracks, "TRACKS", tracks.TRACKS + ("copy",))            # the one line in the registry
    yield tracks.get("copy")
    for name in [m for m in sys.modules if m == "cudabook.copy" or m.startswith("cudabook.copy.")]:
        del sys.modules[name]


def test_a_fifth_track_is_graded(fifth, monkeypatch, capsys):
    from cudabook import gpucompile
    monkeypatch.setattr(gpucompile, "compile_for_gpu", lambda *a, **k: None)   # (its child cannot import a tmp track)
    assert fifth.hint("01_naive") == "out[i] = x[i], for every i of the array"
    assert fifth.grade("01_naive", fifth.stage(1).copy_naive)
    assert capsys.readouterr().out.startswith("PASS: 01_naive is correct on 2 fresh random cases")

    @cuda.jit
    def one_short(x, out):
        i = cuda.grid(1)
        if i < x.shape[0] - 1:
            out[i] = x[i]
    assert not fifth.grade("01_naive", one_short)
    assert "NaN, never written?" in capsys.readouterr().out


def test_a_fifth_track_is_recorded_tabled_and_shown(fifth, tmp_path, capsys):
    w = {"track": "copy", "size": {"n": 1 << 20}, "context": {}, "commit": "abc1234", "date": "2026-11-27",
         "stages": {"01_naive": {"median_us": 10.0, "GBps": 838.9, "correct": True}}, "peers": {}}
    record = {"gpu": "NVIDIA H200", "workloads": {"copy n=1048576": w}}
    (tmp_path / "H200.json").write_text(__import__("json").dumps(record))
    readme = tmp_path / "README.md"
    readme.write_text(f"{results.BEGIN}\n{results.END}\n")
    assert results.update_readme(readme, tmp_path)
    assert "| 01_naive | 10.0 | 839 | 1.0× | ✓ |" in readme.read_text()
    assert "![copy ladder on NVIDIA H200](results/H200_copy.png)" in readme.read_text()
    assert (tmp_path / "H200_copy.png").exists()
    assert [s["n"] for s in sizes.plan("copy")["sizes"]] == [1024, 4096]
    shown = fifth.ladder_so_far("01_naive")
    if lesson.SIMULATOR:
        assert shown is None                                        # nothing recorded in results/ for it
        assert "no copy records in results/" in capsys.readouterr().out
    else:                                                           # a GPU measures it, from its own prepare
        assert shown["workloads"]["copy n=1048576"]["stages"]["01_naive"]["correct"]


def test_a_fifth_track_is_on_the_map_and_built(fifth, tmp_path, monkeypatch):
    lessons = tmp_path / "lessons" / "copy"
    lessons.mkdir(parents=True)
    (lessons / "01_naive.py").write_text("# %% [markdown]\n# # 01 · Naive: a thread per element\n\n"
                                         "# %%\n#! kernel copy.s01_naive copy_naive\n")
    monkeypatch.setattr(notebooks, "SOURCES", tmp_path / "lessons")
    monkeypatch.setattr(notebooks, "PACKAGE", tmp_path / "package")
    assert notebooks.track_titles()["copy"] == "Copy: the throwaway fifth track"
    assert "### Copy: the throwaway fifth track" in notebooks.tracks_map(notebooks.ROOT / "notebooks")
    built = {p.relative_to(notebooks.ROOT).as_posix(): nb for p, nb in notebooks.targets().items()}
    assert "out[i] = x[i]" in built["notebooks/copy/01_naive.ipynb"]["cells"][1]["source"]
