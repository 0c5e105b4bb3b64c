"""The instructor's guide and what it promises: its generated parts match the timing records and the planted
mistakes, a card with no record is "not yet measured", the wheelhouse is built from pyproject.toml's list,
`python -m cudabook` checks an install, `make lab` opens on a map that links every lesson, and headless runs
stay quiet. All fast, on a CPU."""
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from tools import guide, time_lessons, wheelhouse  # noqa: E402

NOTEBOOKS = pytest.mark.skipif(importlib.util.find_spec("nbformat") is None,
                               reason="this image has no notebook stack (nbformat): the GPU machine's lacks it")

try:
    import tomllib
except ModuleNotFoundError:    # Python 3.10: pytest brings tomli
    import tomli as tomllib


def _region(text, name):
    begin, end = guide.markers(name)
    return text[text.index(begin) + len(begin):text.index(end)].strip("\n")


# ---------------------------------------------------------------------------------------------- the guide
def test_the_guide_is_linked_from_the_readme():
    assert "(GUIDE.md)" in (ROOT / "README.md").read_text()


def test_the_guide_timings_are_what_the_records_give():
    text = guide.GUIDE.read_text()
    assert _region(text, "timings") == guide.timings_table(), "GUIDE.md is stale: run python tools/guide.py"


def test_the_guide_lists_the_mistakes_the_tests_plant():
    text = guide.GUIDE.read_text()
    assert _region(text, "mistakes") == guide.mistakes_list(), "GUIDE.md is stale: run python tools/guide.py"


def test_every_lab_has_planted_mistakes_in_the_guide():
    from cudabook import notebooks
    labs = {(str(p.parent.relative_to(notebooks.SOURCES)), p.stem[:-len("_lab")])
            for p in notebooks.SOURCES.glob("**/[0-9][0-9]_*_lab.py")}
    known = {lab for lab in labs if lab[0] in guide.TRACKS and lab[0] != "attention"}   # attention: being written
    missing = known - set(guide.planted_mistakes())
    assert not missing, f"labs whose planted mistakes the guide does not list: {sorted(missing)}"


@NOTEBOOKS
def test_a_card_without_a_record_is_not_yet_measured(tmp_path):
    """A real record of one notebook on this machine: its column has a time, the H100 column none."""
    file = time_lessons.measure([ROOT / "notebooks" / "00_tracks.ipynb"], tmp_path, "nbclient", 300,
                                progress=lambda *a, **k: None)
    record = json.loads(file.read_text())
    entry = record["notebooks"]["notebooks/00_tracks.ipynb"]
    assert entry["ok"] and entry["wall_s"] > 0 and record["machine"]["python"]
    table = guide.timings_table(tmp_path)
    row = next(line for line in table.split("\n") if line.startswith("| 00_tracks |"))
    if record["machine"]["gpu"] == "simulator":
        assert row.split("|")[3].strip() == "not yet measured"
        assert "**H100**: not yet measured" in table
    assert guide.timings_table(tmp_path / "none").count("not yet measured") == len(guide.CARDS)


def test_the_guide_shows_no_notebook_the_workbook_no_longer_has(tmp_path):
    """A record keeps the times of notebooks since renamed (GEMM's 08_sizes became 09_sizes): the guide shows the
    notebooks of today only, and counts only those."""
    record = json.loads(next(guide.TIMINGS.glob("H100*.json")).read_text())
    entry = next(iter(record["notebooks"].values()))
    record["notebooks"] = {"notebooks/gemm/08_sizes.ipynb": entry, "notebooks/gemm/01_naive.ipynb": entry}
    (tmp_path / "H100_80GB_HBM3.json").write_text(json.dumps(record))
    table = guide.timings_table(tmp_path)
    assert "| 08_sizes |" not in table and "| 01_naive |" in table
    assert "1 of 1 notebooks ran to the end" in table


def test_two_cpu_machines_get_columns_that_name_them(tmp_path):
    """A second CPU's record gets its own column, named by its CPU, not a second "CPU (2 cores)"; one CPU alone
    keeps the short heading."""
    record = json.loads(next(guide.TIMINGS.glob("cpu_*.json")).read_text())
    (tmp_path / "cpu_a.json").write_text(json.dumps(record))
    alone = guide.timings_table(tmp_path)
    assert "| rung | CPU (2 cores) |" in alone.replace(f"CPU ({record['machine']['cores']} cores)", "CPU (2 cores)")
    other = dict(record, machine=dict(record["machine"], cpu="AMD EPYC 7B13 64-Core Processor"))
    (tmp_path / "cpu_b.json").write_text(json.dumps(other))
    table = guide.timings_table(tmp_path)
    header = next(line for line in table.split("\n") if line.startswith("| rung |"))
    assert f"CPU (AMD EPYC 7B13, {record['machine']['cores']} cores)" in header
    cells = header.split("|")[1:-1]
    assert header.count("CPU (") == 2 and len(set(cells)) == len(cells), header


def test_the_timing_tool_covers_every_lesson_and_solution():
    paths = {p.relative_to(ROOT).as_posix() for p in time_lessons.notebooks_in([])}
    want = {p.relative_to(ROOT).as_posix() for f in ("notebooks", "solutions")
            for p in list((ROOT / f).glob("*.ipynb")) + list((ROOT / f).glob("*/*.ipynb"))
            if ".ipynb_checkpoints" not in p.parts}
    assert paths == want and "notebooks/00_setup.ipynb" in paths and "solutions/gemm/02_smem_tiles_SOLUTION.ipynb" in paths


# ------------------------------------------------------------------------------------------ the wheelhouse
def test_make_wheelhouse_and_its_test_exist():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^wheelhouse:.*\n\t.*tools/wheelhouse\.py", makefile, re.M)
    assert re.search(r"^PYTHONS \?= 3\.10 3\.11 3\.12$", makefile, re.M)
    script = ROOT / "tools" / "test_wheelhouse.sh"
    assert os.access(script, os.X_OK) and "--no-index" in script.read_text()
    assert "wheelhouse/" in (ROOT / ".gitignore").read_text().split()


def test_the_wheelhouse_is_built_from_pyproject():
    p = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert wheelhouse.requirements() == p["project"]["dependencies"] + p["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("numpy") and "<2.5" in r for r in wheelhouse.requirements())
    assert wheelhouse.PYTHONS == ("3.10", "3.11", "3.12")
    assert all(t.endswith("_x86_64") and t.startswith("manylinux") for t in wheelhouse.PLATFORMS)


def test_every_wheelhouse_python_may_install_the_package():
    from packaging.specifiers import SpecifierSet
    allowed = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert all(f"{py}.0" in allowed for py in wheelhouse.PYTHONS)


def test_check_install_says_versions_and_gpu():
    done = subprocess.run([sys.executable, "-m", "cudabook", "--quick"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    missing = [line.split(":", 1)[1] for line in done.stdout.splitlines() if "some packages are missing:" in line]
    if missing:     # an image without the notebook stack (the GPU machine's): the check must name what it lacks
        assert done.returncode == 1 and "install NOT OK" in done.stdout
        for name in (n.strip() for n in missing[0].split(",")):
            with pytest.raises(importlib.metadata.PackageNotFoundError):
                importlib.metadata.version(name)
        return
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("Python", "numpy", "numba", "numba-cuda", "cuda-python", "install OK"):
        assert name in done.stdout, done.stdout
    assert "GPU:" in done.stdout or "simulator" in done.stdout


# -------------------------------------------------------------------------------------------- quiet runs
@NOTEBOOKS
def test_a_headless_notebook_run_prints_no_transport_warning(tmp_path):
    """ipykernel warns, once per kernel, when it talks over plain TCP; make workbook's kernels use CurveZMQ."""
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nbformat.write(nb, tmp_path / "t.ipynb")
    code = (f"import pathlib; from cudabook.workbook import execute; "
            f"ok, s, err = execute(pathlib.Path({str(tmp_path / 't.ipynb')!r}), None, 120); assert ok, err")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "without encryption" not in done.stdout + done.stderr, done.stderr


def test_an_editable_install_needs_no_meta_path_finder():
    """package-dir = {"" = "."}: setuptools installs the editable package with a .pth file, quietly, instead of
    a meta-path finder it announces with a page of text on every `make` that reinstalls."""
    p = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert p["tool"]["setuptools"]["package-dir"] == {"": "."}


# ------------------------------------------------------------------------------------------------ the map
def test_make_lab_opens_on_the_map():
    lab = re.search(r"^lab:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "jupyter lab" in lab and lab.endswith("notebooks/00_tracks.ipynb")
    assert (ROOT / "notebooks" / "00_tracks.ipynb").exists()


def test_the_map_links_every_lesson_lab_and_solution():
    from cudabook import notebooks
    at = ROOT / "notebooks"
    text = "\n".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                     for c in json.loads((at / "00_tracks.ipynb").read_text())["cells"] if c["cell_type"] == "markdown")
    linked = {(at / link).resolve() for link in re.findall(r"\]\(([^)]+\.ipynb)\)", text)}
    want = set(notebooks.targets()) - {(at / "00_tracks.ipynb").resolve()}
    assert want - linked == set(), f"not on the map: {sorted(str(p.relative_to(ROOT)) for p in want - linked)}"
    assert linked - want == set(), f"the map links notebooks that have no source: {linked - want}"


def test_the_map_follows_the_sources(tmp_path, monkeypatch):
    """A new lesson appears on the map at the next build, with its lab and solution."""
    from cudabook import notebooks
    (tmp_path / "zz").mkdir()
    (tmp_path / "01_a.py").write_text("# %% [markdown]\n# # 01 · First\n")
    (tmp_path / "zz" / "02_b.py").write_text("# %% [markdown]\n# # ZZ 02 · Second thing\n")
    (tmp_path / "zz" / "02_b_lab.py").write_text("# %% [markdown]\n# # ZZ lab 02 · Do it\n")
    monkeypatch.setattr(notebooks, "SOURCES", tmp_path)
    text = notebooks.tracks_map(notebooks.ROOT / "notebooks")
    assert "[First](01_a.ipynb)" in text and "### zz" in text
    assert "[Second thing](zz/02_b.ipynb) | [Do it](../labs/zz/02_b.ipynb) | " \
           "[solution](../solutions/zz/02_b_SOLUTION.ipynb)" in text


def test_a_cell_threshold_that_is_not_a_number_is_named():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "run_notebooks.py")], capture_output=True, text=True,
                          env={**os.environ, "CUDABOOK_CELL_SECONDS": "ten"}, timeout=60)
    assert done.returncode == 1 and "CUDABOOK_CELL_SECONDS must be a number of seconds" in done.stderr
    assert "'ten'" in done.stderr


def test_make_workbook_starts_the_notebooks_that_took_longest_first():
    """Several at a time, a long notebook started last runs alone at the end: `make workbook` orders them by this
    kind of machine's record, the untimed first."""
    from cudabook import workbook
    record = json.loads(next(guide.TIMINGS.glob("cpu_*.json")).read_text())["notebooks"]
    slow, fast = (max(record, key=lambda k: record[k]["wall_s"]), min(record, key=lambda k: record[k]["wall_s"]))
    untimed = ROOT / "notebooks" / "never_timed.ipynb"
    order = workbook.longest_first([ROOT / fast, ROOT / slow, untimed], simulator=True)
    assert order == [untimed, ROOT / slow, ROOT / fast]


@NOTEBOOKS
def test_a_lone_run_keeps_an_earlier_spread_runs_description_apart(tmp_path):
    """A record from a run spread over GPUs (time_lessons --gpus), then one notebook timed again alone: the spread
    run's GPUs, wall time, commit, load and cores move to `spread_run`, and the guide says it was an earlier run,
    not that the lone run's load and cores were the spread run's."""
    file = time_lessons.measure([ROOT / "notebooks" / "00_tracks.ipynb"], tmp_path, "nbclient", 300,
                                progress=lambda *a, **k: None)
    record = json.loads(file.read_text())
    record.update(gpus=2, per_gpu=1, run_wall_s=795.1, commit="abc1234", date="2026-01-02T00:00:00+00:00",
                  load_avg_1min=[9.0])
    record["machine"]["cores"] = 64
    file.write_text(json.dumps(record))
    time_lessons.measure([ROOT / "notebooks" / "00_tracks.ipynb"], tmp_path, "nbclient", 300,
                         progress=lambda *a, **k: None)
    again = json.loads(file.read_text())
    assert "gpus" not in again and "run_wall_s" not in again
    assert again["spread_run"] == {"gpus": 2, "per_gpu": 1, "run_wall_s": 795.1, "commit": "abc1234",
                                   "date": "2026-01-02T00:00:00+00:00", "load_avg_1min": [9.0], "cores": 64}
    table = guide.timings_table(tmp_path)
    assert "an earlier run at abc1234 (2026-01-02) was spread over 2 GPUs" in table and "13.3 min" in table


def test_the_exec_runner_notes_the_longest_a_cell_printed_nothing(tmp_path, monkeypatch):
    """A cell that works in silence is what a learner must never watch for long: run_notebooks.py notes each
    notebook's longest silence (a quiet cell, not one that prints as it goes), time_lessons keeps it, and the
    guide names the worst."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(0.6)"),
                nbformat.v4.new_code_cell("for _ in range(6):\n    print('step', flush=True)\n    time.sleep(0.15)")]
    path = tmp_path / "quiet.ipynb"
    nbformat.write(nb, path)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "run_notebooks.py"), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    quiet = time_lessons.silence(done.stdout)
    assert quiet["quietest_cell"].startswith("cell 0: ") and 0.55 <= quiet["longest_silence_s"] < 2
    assert time_lessons.silence("nothing of the kind") == {}
    monkeypatch.setenv("CUDABOOK_CELL_SECONDS", "0.5")      # run_one's child keeps the cells of 0.5 s or more
    entry = time_lessons.run_one(path, "exec", 120)
    assert entry["ok"] and entry["quietest_cell"].startswith("cell 0: ")
    assert [c.split(":")[0] for c in entry["slow_cells"]] == ["cell 0", "cell 1"]      # 0.6 s and 0.9 s
    from tools import run_notebooks
    assert run_notebooks.longest_silence(10.0, [11.0, 14.5], 15.0) == 3.5
    assert run_notebooks.longest_silence(10.0, [], 12.0) == 2.0
    record = {"notebooks": {"notebooks/msda/02_x.ipynb": {"longest_silence_s": 7.4, "quietest_cell": "cell 6: f()"},
                            "notebooks/gemm/01_y.ipynb": {"longest_silence_s": 2.0, "quietest_cell": "cell 1: g()"},
                            "notebooks/gemm/02_z.ipynb": {}}}
    assert guide._quietest(record) == ("; the longest any cell printed nothing: 7 s (msda/02_x, cell 6), of the 2 "
                                       "notebooks timed since that is noted")
    assert guide._quietest({"notebooks": {"a/b.ipynb": {}}}) == ""
