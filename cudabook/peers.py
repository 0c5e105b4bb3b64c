"""Peers: what a user would write instead (PyTorch, cuBLAS through it), measured in the same process and on the
same data as a track's ladder, never quoted from elsewhere. Each track's benchmark has its own peers; this says
whether they can run here.
"""
from __future__ import annotations


def available() -> str | None:
    """None if torch with CUDA is importable, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no GPU"
    return None


def skipped(progress=print) -> bool:
    """True, after saying why through progress(), where the peers cannot run here."""
    why = available()
    if why:
        progress(f"peers skipped: {why}")
    return why is not None
