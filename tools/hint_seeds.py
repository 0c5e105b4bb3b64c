"""Does each planted mistake get the same verdict and hint whatever the random data? Every planted mistake this
machine grades (each track's cudabook/<track>/mistakes.py, run as tests/mistakes_grading.py runs it) is graded
once per seed, on the inputs that a test run with CUDABOOK_SEED=<seed> draws, and the mistakes are listed whose
required phrases (the table's `says`) are in the message for some seeds and not others, or whose test passes for
some seeds and fails for others; then, for information, those whose Hint lines (numbers aside) differ between
seeds although their phrases do not.

    python tools/hint_seeds.py                          every track, seeds 1 .. 5, two processes
    python tools/hint_seeds.py --track msda -k 02- --seeds 11 12 13
    python tools/hint_seeds.py --show                   also print each mistake's hint lines per seed

Exit status 1 when some mistake's phrases or outcome depend on the seed. Slow (every mistake graded once per seed:
five seeds cost five runs of the mistakes tests), so it is a tool, not a CI test; the tests themselves draw a fresh
seed each run, and print it when they fail.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import pathlib
import re
import sys
import tempfile
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _setup():
    for path in (ROOT / "tests", ROOT):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    import cudabook  # noqa: F401  (decides simulator or GPU before numba is imported)


def mistakes(tracks, pattern):
    """[(track, index in its table, test id)] of the mistakes the grader runs (not the checker's own)."""
    _setup()
    from mistakes_grading import table
    return [(name, i, f"{name}-{m.id}") for name in tracks for i, m in enumerate(table(name))
            if m.where != "checker" and (not pattern or pattern in f"{name}-{m.id}")]


_REAL_RNG = []        # numpy's own default_rng, kept the first time _seeded replaces it (in this process)


def _seeded(seed):
    """np.random.default_rng() as the tests' conftest makes it for CUDABOOK_SEED=seed: every unseeded call draws
    from the next child of one SeedSequence."""
    import numpy as np
    if not _REAL_RNG:
        _REAL_RNG.append(np.random.default_rng)
    sequence = np.random.SeedSequence(seed)
    np.random.default_rng = lambda s=None: _REAL_RNG[0](sequence.spawn(1)[0] if s is None else s)


def grade(job):
    """Grade one mistake under each seed: (test id, says, [(seed, outcome, message)]); outcome "failed as
    expected", "skipped: ...", or "test fails: ..." (the test's own assertion)."""
    name, index, test_id, seeds = job
    _setup()
    import pytest

    from cudabook import device
    from mistakes_grading import grader_fails, table
    m = table(name)[index]
    runs = []
    for seed in seeds:
        _seeded(seed)
        buffer = io.StringIO()
        capsys = types.SimpleNamespace(readouterr=lambda: types.SimpleNamespace(out=_take(buffer), err=""))
        monkeypatch = pytest.MonkeyPatch()
        try:
            with contextlib.redirect_stdout(buffer), tempfile.TemporaryDirectory() as tmp:
                grader_fails(name, m, capsys, monkeypatch, pathlib.Path(tmp))
            outcome = "failed as expected"
        except pytest.skip.Exception as e:
            outcome = f"skipped: {e}"
        except AssertionError as e:
            outcome = "test fails: " + str(e).split("\n", 1)[0]
        finally:
            monkeypatch.undo()
            device.EMULATED = None
        text = buffer.getvalue()
        runs.append((seed, outcome, text.split("\n", 1)[1] if text.startswith("--- ") else text))
    return test_id, m.says, runs


def _take(buffer):
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def _phrases(says, message):
    """Which of the required phrases (each a string or a tuple of alternatives) the message holds."""
    return tuple(any(a in message for a in (s if isinstance(s, tuple) else (s,))) for s in says)


def _hints(message, raw=False):
    """The message's Hint lines; numbers made # unless raw (the comparison: which hint, not where)."""
    lines = [line for line in message.split("\n") if line.startswith("Hint")]
    return tuple(lines if raw else (re.sub(r"\d+(\.\d+)?", "#", line) for line in lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--track", action="append", help="a track (repeat for more); default: every track")
    parser.add_argument("-k", dest="pattern", default="", help="only the mistakes whose test id holds this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print every mistake's hint lines per seed")
    args = parser.parse_args(argv)
    _setup()
    from cudabook import track
    jobs = [(name, i, test_id, args.seeds) for name, i, test_id in mistakes(args.track or track.TRACKS, args.pattern)]
    print(f"{len(jobs)} planted mistakes x seeds {args.seeds}", flush=True)
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        results = sorted(pool.imap_unordered(grade, jobs), key=lambda r: r[0])
    unstable, broken, varied = [], [], []
    for test_id, says, runs in results:
        graded = [(seed, outcome, text) for seed, outcome, text in runs if not outcome.startswith("skipped")]
        if not graded:
            continue
        outcomes = {outcome for _, outcome, _ in graded}
        phrases = {_phrases(says, text) for _, _, text in graded}
        if len(phrases) > 1 or len(outcomes) > 1:
            unstable.append((test_id, says, graded))
        elif outcomes != {"failed as expected"}:
            broken.append((test_id, says, graded))
        elif len({_hints(text) for _, _, text in graded}) > 1:
            varied.append((test_id, says, graded))
        if args.show:
            print(f"\n{test_id}")
            for seed, outcome, text in graded:
                print(f"  seed {seed}: {outcome}: " + (" | ".join(_hints(text, raw=True)) or "(no hint)"))
    for title, group in (("Phrases or outcome depend on the seed", unstable),
                         ("The test fails for every seed", broken),
                         ("Phrases stable, hint lines differ between seeds", varied)):
        print(f"\n{title}: {len(group)}")
        for test_id, says, graded in group:
            print(f"  {test_id}   (says {list(says)})")
            for seed, outcome, text in graded:
                found = _phrases(says, text)
                print(f"    seed {seed}: {outcome}; phrases {['yes' if f else 'NO' for f in found]}")
                for hint in _hints(text, raw=True) or ("(no hint)",):
                    print(f"      {hint[:200]}")
    return 1 if unstable else 0


if __name__ == "__main__":
    sys.exit(main())
