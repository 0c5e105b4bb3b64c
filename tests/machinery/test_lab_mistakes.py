"""The planted-mistake tables themselves (cudabook/<track>/mistakes.py): each track's tests run them through the
grader (tests/<track>/test_<track>_mistakes.py, made by tests/mistakes_grading.py); here, what every table must
hold."""
import pytest

from cudabook import track
from mistakes_grading import table


@pytest.mark.parametrize("name", track.TRACKS)
def test_every_numba_lab_has_five_mistakes(name):
    stages = {m.stage for m in table(name) if m.kernel and m.where != "checker"}
    for stage in stages:
        assert sum(m.stage == stage and m.where != "checker" for m in table(name)) >= 5, (name, stage)


def test_the_mistakes_are_unique():
    ids = [f"{name}-{m.id}" for name in track.TRACKS for m in table(name)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
