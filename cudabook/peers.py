"""Peers: what a user would write instead (PyTorch, cuBLAS through it), measured in the same process and on the
same data as a track's ladder, never quoted from elsewhere. Each track's benchmark has its own peers; this says
whether they can run here, how much GPU memory they may take, and gives it back after.

A lesson shares its GPU (a learner's lab beside it, a pair on one card): a peer is sized from the memory free
now, never by running out of it and trying again, and takes at most a third of the card (SHARE), less what the
lesson holds already.
"""
from __future__ import annotations

SHARE = 3                  # a lesson uses at most 1/SHARE of the card
MARGIN = 1 << 30           # bytes left free beyond the estimate: the allocator's rounding, the CUDA context


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


def memory_budget(held=0, *, free=None, total=None) -> int:
    """Bytes a peer may allocate now: a SHARE-th of the card less `held` (what this lesson holds already, its
    inputs and output), and never more than what is free now less MARGIN. free and total default to
    torch.cuda.mem_get_info() (the whole card's, whoever holds the rest)."""
    if free is None or total is None:
        import torch
        free, total = torch.cuda.mem_get_info()
    return max(0, min(total // SHARE - held, free - MARGIN))


def at_once(count, per_item, budget, fixed=0) -> int:
    """How many of `count` items (images, batches) to give one call: as many as `budget` bytes hold at
    `per_item` bytes each after `fixed` bytes, spread evenly over the calls (48 images with room for 13: four
    calls of 12, not three of 13 and one of 9); 0 when not even one fits."""
    fit = (budget - fixed) // per_item if per_item > 0 else count
    if fit < 1:
        return 0
    calls = -(-count // min(fit, count))
    return -(-count // calls)


def release():
    """Give the memory the peers' tensors held back to the card (torch keeps freed blocks cached otherwise)."""
    import gc
    gc.collect()
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def gib(nbytes) -> str:
    return f"{nbytes / 2 ** 30:.1f} GiB"
