"""Stage 04 trusting every window to fit: a run that spans more rows than window_rows is clamped instead of
taking the per-target path."""
from corpus.mutate import mutant
from cudabook.resample.s04_smem_windows import launch as _launch

BUG = "no fallback for a run that spans more rows than the window: its span is clamped to window_rows"
SIZE = dict(B=2, S=40, T=24, D=16)
GPU_SIZE = dict(B=4, S=2000, T=700, D=67)     # most runs span more rows than the window
PARAMS = dict(threads=64, targets_per_block=8, window_rows=8, chunk_cols=16)

kernel = mutant("cudabook.resample.s04_smem_windows", "resample_windows", [("row0, span = window_of(smi, BOFF + 2 * slot, is_sorted, wrows)",
                                              "row0, span = window_of(smi, BOFF + 2 * slot, is_sorted, wrows)\n"
                                              "        span = min(span, wrows)")])


def launch(p):
    _launch(p, kernel=kernel, **PARAMS)
