"""06 copying one row too few of each window: the last source row never reaches shared memory, so every
target in a window's last interval interpolates towards a stale row (another item's data)."""
import pytest

from cudabook.resample import s06_cp_async as s06

BUG = "06: the window's last row is never copied (cp.async loop bound off by one)"
GPU_ONLY = "a CUDA C++ kernel: it runs only on a GPU"
GPU_SIZE = dict(B=4, S=700, T=2000, D=64)

SOURCE = s06.source().replace("for (int c = tid; c < n * VPR; c += NT) {",
                              "for (int c = tid; c < (n - 1) * VPR; c += NT) {")
assert SOURCE != s06.source(), "the planted bug no longer matches the kernel text"


def launch(p):
    if s06.unavailable():
        pytest.skip(s06.unavailable())
    s06.launch(p, kernel=SOURCE)
