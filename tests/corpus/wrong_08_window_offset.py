"""08 with the window search's answer used as a row index without the window's start: every target past the
window at the start of its row blends rows near the top of the batch row. On a GPU for real; without one, in
the CPU emulator (the kernel is C++)."""
import contextlib

from cudabook.resample import s08_fused_gather as s08

BUG = "08: the window's interval taken as the row (lo = j, not start + j)"
SIZE = dict(B=2, S=300, T=90, D=8)           # rows past the first window of 128 times
GPU_SIZE = dict(B=4, S=700, T=2000, D=64)

SOURCE = s08.source().replace("        lo = start + j;", "        lo = j;")
assert SOURCE != s08.source(), "the planted bug no longer matches the kernel text"


def launch(p):
    from cudabook import emulate
    with emulate.emulating() if s08.unavailable() else contextlib.nullcontext():
        s08.launch(p, kernel=SOURCE)
