"""07 with the TMA box coordinates off by one row: each box lands one source row late in shared memory, so
every target interpolates between the wrong pair of rows."""
import pytest

from cudabook.resample import s07_tma as s07

BUG = "07: TMA box row coordinate off by one"
GPU_ONLY = "a CUDA C++ kernel: it runs only on a Hopper GPU"
GPU_SIZE = dict(B=4, S=700, T=2000, D=64)

SOURCE = s07.source().replace("tma_load_3d(dst + r * BOX_BYTES, &fmap, full, it.d0, L + r * BOXR, it.b);",
                              "tma_load_3d(dst + r * BOX_BYTES, &fmap, full, it.d0, L + r * BOXR + 1, it.b);")
assert SOURCE != s07.source(), "the planted bug no longer matches the kernel text"


def launch(p):
    if s07.unavailable():
        pytest.skip(s07.unavailable())
    s07.launch(p, kernel=SOURCE)
