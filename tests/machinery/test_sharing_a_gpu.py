"""A lesson and its lab at once on one GPU, as a pair of learners (or one learner with the lab open beside the
lesson) runs them: the deformable-attention track's first lesson and its lab's solution, each in its own process
on the same card, both to the end. That lesson draws the largest inputs of the workbook (3 GB) and sizes its peers
from the free memory, so it is the one that would fail first if a lesson took the whole card."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAIR = ("notebooks/msda/01_naive.ipynb", "solutions/msda/01_naive_SOLUTION.ipynb")

pytestmark = [pytest.mark.gpu,
              pytest.mark.timeout(900)]  # a full-size lesson beside the rest of a GPU suite: minutes, not seconds


def test_a_lesson_and_its_lab_run_at_once_on_one_gpu(tmp_path):
    sys.path.insert(0, str(ROOT))
    from tools import time_lessons
    paths = [ROOT / p for p in PAIR]
    assert all(p.exists() for p in paths), PAIR
    file = time_lessons.measure(paths, tmp_path, "exec", timeout=600, progress=lambda *a, **k: None, gpus=1,
                                per_gpu=2)
    record = json.loads(file.read_text())
    ran = record["notebooks"]
    assert set(ran) == set(PAIR)
    failed = {name: entry["error"] for name, entry in ran.items() if not entry["ok"]}
    assert not failed, f"sharing one GPU, these failed: {failed}"
    walls = [entry["wall_s"] for entry in ran.values()]
    assert record["run_wall_s"] < sum(walls), "the two did not run at the same time"
