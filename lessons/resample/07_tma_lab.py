# %% [markdown]
# # Lab 07 · One thread, a whole window
#
# In stage 07 the producer warp's lane 0 asks the Tensor Memory Accelerator for an item's window of source rows.
# Everything around it is written: the window (first row `L`, `n` rows), the stage `s` it goes to, and that
# stage's **full** mbarrier `full` (a shared-memory address). Write the two steps, in this order:
#
# 1. **Announce the bytes.** `mbar_expect_tx(full, bytes)`: lane 0 arrives on the barrier and tells it
#    how many bytes will land. The copies come in boxes of `BOXR` rows x `DC` channels, `BOX_BYTES` each; a
#    window of `n` rows needs `nbox = (n + BOXR - 1) / BOXR` of them. A box that runs past the last source row is
#    filled with zeros by the copy engine and still counts its bytes. (Also count `WT_ROWS * 4` bytes when
#    `TIMES_TMA` is on: write `(TIMES_TMA ? WT_ROWS * 4 : 0)`.)
# 2. **Issue the boxes.** Box `r` goes to shared address `smem_u32(fs) + s * FS_BYTES + r * BOX_BYTES` with
#    `tma_load_3d(dst, &fmap, full, c0, c1, c2)`; its coordinates are **innermost first**: channel `it.d0`,
#    row `L + r * BOXR`, batch `it.b`.
#
# On a GPU a wrong byte count is no error message: announce more bytes than the boxes bring and the barrier never
# completes, so the consumers wait until the kernel's watchdog (`WATCHDOG_NS`) stops it after 20 s with an error,
# and the notebook's kernel must be restarted; announce fewer and the barrier may complete before all the data is
# there.
#
# Without a Hopper GPU the grader compiles your code for sm_90a and then runs it **on the CPU, in an emulator**
# (`cudabook.emulate`): every CUDA thread is a small coroutine, and each TMA box lands at the latest moment the
# barriers allow, filled from the tensor map by `cudabook.tma.load_box` (zeros past the edges). It counts the
# barrier's arrivals and bytes, so a wrong byte count is named ("expect_tx says N bytes, the boxes deliver M"),
# and a barrier that can never complete is reported with what every thread waits for, instead of hanging.
# Then it runs everything again with each copy landing the moment it is issued: a correct kernel is right both
# ways. It cannot time anything: speed needs the GPU.

# %%
import cudabook
print(cudabook.where())
from cudabook.resample import grade

# %%
#! region resample/kernels/tma.cu ISSUE

# %%
grade("07_tma", ISSUE)

# %% [markdown]
# The lesson this lab belongs to: [07 · tma](../../notebooks/resample/07_tma.ipynb).
