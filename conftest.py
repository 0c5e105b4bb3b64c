"""pytest, for every folder of the repository: a solution notebook must PASS its own grader.

nbval runs the notebooks in `--nbval-lax` mode: a cell fails only if it raises. A lab's grader prints its verdict
and returns False instead of raising (a learner's wrong answer is not an error), so a solution notebook whose
grade cell printed FAIL would still pass. Here the grade cell of a notebook under solutions/ must print the
grader's "PASS:", or the cell fails with what the grader printed. The tests that grade the same solutions
(tests/<track>/) lean on this in the simulator, where grading twice is the slowest part of CI."""
import pytest


def _graded_cell_failed(item) -> str | None:
    """For a solution notebook's cell that calls grade(...): the grader's output when it has no PASS, else None."""
    if "solutions" not in item.path.parts:
        return None
    source = getattr(getattr(item, "cell", None), "source", "") or ""
    if not any(line.lstrip().startswith("grade(") for line in source.splitlines()):
        return None
    printed = "".join(out.get("text", "") for out in (getattr(item, "test_outputs", None) or []))
    return None if "PASS:" in printed else (printed.strip() or "(the cell printed nothing)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    printed = _graded_cell_failed(item)
    if printed is not None:
        report.outcome = "failed"
        report.longrepr = f"the solution notebook's grade cell did not PASS; the grader printed:\n{printed[-3000:]}"
