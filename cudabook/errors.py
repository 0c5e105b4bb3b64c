"""Errors that the kit raises and the machinery above it catches, in a module that imports nothing.

(cudabook.track re-exports both: `track.StageUnavailable`, `track.KernelTimeout`.)
"""
from __future__ import annotations


class StageUnavailable(RuntimeError):
    """This machine cannot run the stage; the message says what it needs and what the machine has."""


class KernelTimeout(RuntimeError):
    """A launch did not finish within its time limit (an endless loop, or threads waiting for each other)."""
