import numpy as np
from numba import cuda

from cudabook.bits import _as_bits
from corpus.mutate import mutant
from cudabook.resample.s01_naive import launch as _launch

BUG = "float32 -> bf16 by truncation (drop the low 16 bits) instead of rounding to nearest even"


@cuda.jit(device=True)
def truncate_to_bf16(x):
    return np.uint16(_as_bits(x) >> np.uint32(16))


kernel = mutant("cudabook.resample.s01_naive", "resample_naive", f32_to_bf16=truncate_to_bf16)


def launch(p):
    _launch(p, kernel=kernel)
