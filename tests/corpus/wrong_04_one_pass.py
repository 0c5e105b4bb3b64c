"""Stage 04's persistent grid without its loop: `if` where `while` belongs."""
from corpus.mutate import mutant
from cudabook.resample.s04_smem_windows import launch as _launch

BUG = "persistent grid without its loop: a block does one work item, the items beyond the grid are never done"
SIZE = dict(B=2, S=19, T=45, D=16)
PARAMS = dict(threads=64, targets_per_block=8, window_rows=12, chunk_cols=16, blocks=3)

kernel = mutant("cudabook.resample.s04_smem_windows", "resample_windows", [("while item < n_items:", "if item < n_items:")])


def launch(p):
    _launch(p, kernel=kernel, **PARAMS)
