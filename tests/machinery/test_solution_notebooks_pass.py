"""The repository's conftest.py fails a solution notebook whose grade cell does not print the grader's PASS (nbval
runs notebooks in lax mode, where only a raised exception fails a cell, and a grader prints FAIL and returns)."""
import importlib.util
import pathlib
from types import SimpleNamespace

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _item(path, source, *printed):
    return SimpleNamespace(path=ROOT / path, cell=SimpleNamespace(source=source),
                           test_outputs=[{"name": "stdout", "text": text} for text in printed])


def test_a_solution_grade_cell_without_pass_fails_with_what_the_grader_said():
    failed = _root_conftest()._graded_cell_failed
    said = "FAIL: 3 of 40 outputs are wrong\nIt looks like the last tile is missing."
    assert failed(_item("solutions/attention/03_tiled_SOLUTION.ipynb", 'grade("03_tiled", attention_tiled)', said)) \
        == said
    assert failed(_item("solutions/gemm/04_mma_sync_SOLUTION.ipynb", 'grade("04_mma_sync", PIPELINE)')) \
        == "(the cell printed nothing)"


def test_a_passing_grade_cell_other_cells_and_labs_are_left_alone():
    failed = _root_conftest()._graded_cell_failed
    assert failed(_item("solutions/msda/01_naive_SOLUTION.ipynb", 'grade("01_naive", msda_naive)',
                        "PASS: 01_naive is correct on 7 fresh random cases")) is None
    assert failed(_item("solutions/msda/01_naive_SOLUTION.ipynb", "x = 1", "")) is None       # no grade call
    assert failed(_item("labs/msda/01_naive.ipynb", 'grade("01_naive", msda_naive)', "FAIL: TODO")) is None
