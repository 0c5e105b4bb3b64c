# %% [markdown]
# # GEMM 08 · The whole ladder, and why size matters
#
# Seven rungs, one problem: `C = A @ B`, bf16 in, fp32 sums, bf16 out. This lesson puts them side by side
# against cuBLAS (`torch.matmul`, measured in the same process on the same data), then asks the question the
# single number at 4096 hides: **how does each rung fare from 256 to 8192?** The answer bears on a puzzle from
# the optimisation logs this workbook grew from: a first TMA + WGMMA kernel that reached only 45–47 % of cuBLAS
# at sizes 256–1024 (the log's own claim, fp16 on an H800 PCIe; not rerun here).

# %%
import cudabook
print(cudabook.where())

import matplotlib.pyplot as plt
from cudabook import SIMULATOR, device, gemm, lesson
from cudabook.gemm import sizes

# %% [markdown]
# ## The ladder at 4096
#
# On a GPU this cell measures every rung the GPU can run, with cuBLAS beside it; without one it shows the
# records in `results/` (each with the GPU, the versions and the commit it was measured with).

# %%
lesson.ladder_so_far(gemm.STAGES[-1], peers=True, track="gemm")

# %% [markdown]
# ## Waves of tiles
#
# Every rung from 02 on gives each block (or each pass of a persistent block) one `BM x BN` tile of C. An
# H100 SXM has 132 SMs. With one block per SM, the tiles run in *waves* of 132; when the last wave is only
# partly full, the other SMs sit idle until it ends. Count the tiles:
#
# | M = N | 128 x 128 tiles | waves on 132 SMs | SM time busy |
# |---|---:|---:|---:|
# | 1024 | 64 | 0.48 | 48 % |
# | 2048 | 256 | 1.94 | 97 % |
# | 4096 | 1024 | 7.76 | 97 % |
#
# At 1024 half the GPU never works, however fast each tile is. cuBLAS has many kernels and picks one per
# shape (smaller tiles, or a split of K across blocks, for small problems); a workbook kernel with one tile
# shape does not. Idle SMs alone are enough to explain a number like that log's 45–47 %, without any slow
# tensor-core code.

# %%
sms = device.gpu().sms if device.gpu() else 132
for s in (256, 512, 1024, 2048, 4096, 8192):
    print(f"M = N = {s:>4}: " + "   ".join(
        f"{bm}x{bn}: {sizes.tiles(s, s, bm, bn):>5} tiles, {100 * sizes.wave_efficiency(s, s, bm, bn, sms):5.1f} % busy"
        for bm, bn in ((128, 128), (128, 256))))
sizes.plot_waves(sms=sms)
plt.show()

# %% [markdown]
# A persistent kernel (rungs 06 and 07) does not escape this: it hands the same tiles to the same SMs, just
# without relaunching blocks. Smaller tiles fill the waves better but read more bytes per FLOP (lesson 01's
# roofline: a `BM x BN` tile reads `(BM + BN) * K` values for `2 * BM * BN * K` FLOPs); splitting K gives more,
# smaller pieces of work at the price of a reduction. Both are experiments worth trying on the rungs below.
#
# ## Every rung against cuBLAS, 256 to 8192
#
# On a Hopper GPU the next cell measures every rung at M = N = K from 256 to 8192 (it takes a minute or two:
# the Numba rungs are slow at 8192). Without one it draws the sweep recorded in `results/sweeps/`.

# %%
if not SIMULATOR and not gemm.unavailable(gemm.STAGES[-1]):
    rows = sizes.sweep(progress=print)
    sizes.plot_sweep(rows, title=f"{device.gpu().name}: % of cuBLAS (measured now)")
    plt.show()
else:
    recorded = sizes.load_sweeps()
    if not recorded:
        print("No sweep recorded in results/sweeps/ yet: run `python -m cudabook.gemm.sizes` on a Hopper GPU.")
    for r in recorded:
        sizes.plot_sweep({int(k): v for k, v in r["sizes"].items()},
                         title=f"{r['machine']['gpu']} (recorded, commit {r['commit']}): % of cuBLAS")
        plt.show()

# %% [markdown]
# Read the plot from left to right.
#
# - **256 to 1024**: every rung is far from cuBLAS, and the order of the Hopper rungs is *reversed*: rung 05,
#   with 128 x 128 tiles and one block per tile, beats 06 and 07, whose 128 x 256 tiles are half as many. At
#   1024 that is 32 tiles for 132 SMs: three quarters of the GPU idle, however good the pipeline. Rung 05 lands
#   where that log's first WGMMA kernel did, near half of cuBLAS.
# - **2048 and up**: enough tiles for several waves; the rungs are compute-bound and their order is the
#   ladder's, each one above the one before.
# - **the Numba rungs** fall away as size grows: their fp32 FMAs run at a fraction of the tensor cores' rate,
#   so the benchmark also measures them against cuBLAS's fp32 SGEMM (the `% of SGEMM` column above).
#
# One caution when you read % of cuBLAS at 8192: there rung 07 is recorded *above* cuBLAS. cuBLAS's own
# TFLOP/s drops from 4096 to 8192 in the records (printed below), while rungs 06 and 07 do not: at that size
# the GPU runs hot and its clocks move. A percentage is only as steady as its yardstick: compare rungs within
# one run (as every table here does), never across runs.

# %%
for r in sizes.load_sweeps():
    print(f"{r['machine']['gpu']}, recorded (commit {r['commit']}): TFLOP/s")
    for s, row in sorted(((int(k), v) for k, v in r["sizes"].items())):
        print(f"  M = N = K = {s:>4}: " + "   ".join(
            f"{name} {row[name]['TFLOPs']:6.1f}" for name in ("cublas", "06_warp_specialized", "07_clusters")
            if row.get(name, {}).get("TFLOPs")))

# %% [markdown]
# **Try it.** Rerun the sweep for one rung with another tile width, e.g. (after `from cudabook import results`)
# `results.measure_workload("gemm", dict(M=1024, N=1024, K=1024), stages=["05_wgmma_tma"], params={"05_wgmma_tma": {"bn": 64}})`,
# and compare the wave count with the table above.
