"""The face every track shows the machinery (cudabook.kit.ladder.face and the track's package), one test for all of
cudabook.track.TRACKS: its name and registry entry, the stage ladder (in order, by name or number, an unknown
stage refused with the list), the grader taking the track by name, its grading cases fresh on every call, and the
benchmark module's shape that cudabook.results expects. What only one track has stays in its own tests."""
import re

import numpy as np
import pytest

from cudabook import labs, track


@pytest.mark.parametrize("name", track.TRACKS)
def test_the_face(name):
    t = track.get(name)
    assert t.NAME == name and track.get(name) is t and name in track.TRACKS
    assert t.StageUnavailable is track.StageUnavailable
    assert t.STAGES[0] == "01_naive" and list(t.STAGES) == sorted(t.STAGES)
    assert set(t.STAGES) <= set(t._LADDER.modules)
    assert t.stage(1).NAME == "01_naive" and t.stage("01").NAME == "01_naive" and t.unavailable("01") is None
    label = t._LADDER.label
    with pytest.raises(ValueError, match=re.escape(f"unknown {label} '99_nope'; the stages are: "
                                                   f"{', '.join(t.STAGES)}")):
        t.stage("99_nope")


def test_an_unknown_track_is_refused():
    with pytest.raises(ValueError, match="unknown track"):
        track.get("nope")


@pytest.mark.parametrize("name", track.TRACKS)
def test_the_grader_takes_the_track_by_name(name, capsys):
    t = track.get(name)
    assert not labs.grade(t.STAGES[0], None, track=name)
    assert "No kernel to grade yet" in capsys.readouterr().out
    assert labs.hint(t.STAGES[0], track=name) != "write the kernel body"      # the stage's own lab region


@pytest.mark.parametrize("name", track.TRACKS)
def test_the_grading_cases_are_fresh(name):
    t = track.get(name)
    c1, c2 = t.grading_cases(), t.grading_cases()
    assert [n for n, _, _ in c1] == [n for n, _, _ in c2]
    arrays = [(a, b) for a, b in zip(c1[0][1], c2[0][1]) if isinstance(a, np.ndarray)]
    assert any(not np.array_equal(a, b) for a, b in arrays)                   # fresh random inputs each call


@pytest.mark.parametrize("name", track.TRACKS)
def test_the_bench_module_has_the_shape_results_expects(name):
    spec = track.get(name).bench
    assert set(spec.REQUIRED) <= {k for _, k, _ in spec.COLUMNS} | {"correct"}
    assert spec.PLOT_KEY in {k for _, k, _ in spec.COLUMNS}
    for helper in ("prepare", "context", "summary", "metrics", "peers", "consistency"):
        assert callable(getattr(spec, helper)), helper
