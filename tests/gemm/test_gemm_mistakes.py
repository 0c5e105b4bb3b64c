"""The gemm track's planted mistakes through the grader (the tests themselves: tests/mistakes_grading.py)."""
from mistakes_grading import planted_mistake_tests

test_the_grader_fails_a_planted_mistake, test_every_planted_mistake_still_applies = planted_mistake_tests("gemm")
