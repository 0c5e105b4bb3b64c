"""The checker must catch every deliberately wrong kernel in tests/corpus/.

Each module there defines BUG (what is wrong), launch(p), and optionally SIZE (simulator), GPU_SIZE, SORTED,
and GPU_ONLY or SIM_ONLY (a sentence saying why the bug can only be shown there). A planted bug counts
as caught when the checker's verdict fails, or when the kernel raises (the simulator's warp operations raise
on a wrong mask, for instance). Fresh random inputs each try; a bug must be caught within three tries.
"""
import importlib
import pathlib

import pytest

from cudabook import SIMULATOR, simwarp
from cudabook.resample import checking as check

CORPUS = sorted(p.stem for p in (pathlib.Path(__file__).parents[1] / "corpus").glob("wrong_*.py"))
DEFAULT_SIZE = dict(B=2, S=19, T=45, D=6) if SIMULATOR else dict(B=4, S=700, T=2000, D=67)


def attempt(module):
    size = getattr(module, "SIZE", DEFAULT_SIZE) if SIMULATOR else getattr(module, "GPU_SIZE", DEFAULT_SIZE)
    try:
        verdict = check.check_launch(module.launch, **size, sorted_targets=getattr(module, "SORTED", True))
    except simwarp.WarpMaskError as e:
        return f"raised {e}"
    return None if verdict.ok else verdict.message


@pytest.mark.parametrize("name", CORPUS)
def test_checker_catches(name):
    module = importlib.import_module(f"corpus.{name}")
    if getattr(module, "GPU_ONLY", False) and SIMULATOR:
        pytest.skip(f"{name}: {module.GPU_ONLY}")
    if getattr(module, "SIM_ONLY", False) and not SIMULATOR:
        pytest.skip(f"{name}: {module.SIM_ONLY}")
    for _ in range(3):
        caught = attempt(module)
        if caught:
            print(f"{name} ({module.BUG}) caught:\n{caught}")
            return
    pytest.fail(f"the checker let a wrong kernel pass three times: {name}: {module.BUG}")


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 5


def test_an_unmutated_mutant_passes():
    """The mutation machinery itself: the stage's kernel, recompiled with no edit, is correct."""
    from corpus.mutate import mutant
    from cudabook.resample import s01_naive
    kernel = mutant("cudabook.resample.s01_naive", "resample_naive")
    size = dict(B=2, S=19, T=45, D=6) if SIMULATOR else DEFAULT_SIZE
    verdict = check.check_launch(lambda p: s01_naive.launch(p, kernel=kernel), **size)
    assert verdict.ok, str(verdict)


def test_a_stale_mutation_fails_loudly():
    from corpus.mutate import mutant
    with pytest.raises(AssertionError, match="occurs 0 times"):
        mutant("cudabook.resample.s01_naive", "resample_naive", [("no such line", "x")])
