# %% [markdown]
# # GEMM 09 · The whole ladder, and why size matters
#
# Eight rungs, one problem: `C = A @ B`, bf16 in, fp32 sums, bf16 out (rung 08 quantises the inputs to FP8
# first, lesson 08). This lesson puts them side by side against cuBLAS (`torch.matmul`, measured in the same
# process on the same data; for 08, cuBLASLt's FP8 GEMM), then asks the question the single number at 4096
# hides: **how do the rungs fare as the problem grows and shrinks?** The answer bears on a puzzle from the
# optimisation logs this workbook grew from: a first TMA + WGMMA kernel that reached only 45–47 % of cuBLAS at
# sizes 256–1024 (the log's own claim, fp16 on an H800 PCIe; not rerun here).

# %%
import cudabook
print(cudabook.where())

import matplotlib.pyplot as plt
from cudabook import device, gemm
from cudabook.gemm import waves     # the arithmetic of tiles and waves

# %% [markdown]
# ## The ladder at 4096
#
# On a Hopper GPU this cell measures all eight rungs now, with cuBLAS beside them (`full=True`): the
# comparison is only fair within one run, as the caution further down explains. That takes longer than the
# other lessons' ladders, which measure two rungs; the cell says each step as it starts. The top rungs are
# timed against their peers again in interleaved rounds, but not run back to back for seconds each: that is
# lessons 07 and 08's comparison, and it costs seconds a pair. Without a Hopper GPU it shows the records in
# `results/` (each with the GPU, the versions and the commit it was measured with).

# %%
gemm.ladder_so_far(gemm.STAGES[-1], peers=True, full=True, sustained="none")

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
        f"{bm}x{bn}: {waves.tiles(s, s, bm, bn):>5} tiles, {100 * waves.wave_efficiency(s, s, bm, bn, sms):5.1f} % busy"
        for bm, bn in ((128, 128), (128, 256))))
waves.plot_waves(sms=sms)
plt.show()

# %% [markdown]
# A persistent kernel (rung 06) does not escape this: it hands the same tiles to the same SMs, just without
# relaunching blocks. Smaller tiles fill the waves better but read more bytes per FLOP (lesson 01's roofline: a
# `BM x BN` tile reads `(BM + BN) * K` values for `2 * BM * BN * K` FLOPs); splitting K gives more, smaller
# pieces of work at the price of a reduction. Rung 07 now does the second for its last wave where that pays,
# after at least one whole wave (Stream-K, lesson 07's last section); below one wave it too leaves SMs idle.
#
# ## The fast rungs against cuBLAS, across sizes
#
# The ladder above is one size. Across M = N = K, recorded on a GPU with `python tools/sweep_sizes.py --track gemm`
# (the same sweep every track has) when 07 was the top rung: its default, the last three rungs, 05 to 07, and
# two cuBLAS kernels, each point checked against the reference. `cublas` is the bf16 yardstick (100 %);
# `cublas_sgemm` is cuBLAS's fp32 SGEMM, the yardstick of the Numba rungs, whose fp32 FMAs cannot use the tensor
# cores. The record holds one launch's time, TFLOP/s and % of cuBLAS at each size, with the card and the commit
# it was measured at.

# %%
from cudabook import sizes

sizes.show("gemm")

# %% [markdown]
# The plot does not say how many tiles each rung launched. The record does: every row keeps the rung's
# parameters, so its tile (`BM x BN`) and the waves it made on the recorded card can be counted, beside the
# rung's % of cuBLAS and the order of the rungs at each size.

# %%
for record in sizes.load("gemm"):
    sms = record["machine"].get("sms") or 132
    print(f"{record['gpu']} ({sms} SMs), commit {record.get('commit') or '?'}: % of cuBLAS, tiles, SM time busy")
    for x in sorted({row["size"]["M"] for row in record["rows"]}):
        rungs = [row for row in record["rows"] if row["size"]["M"] == x and not row.get("peer")
                 and "pct_of_cublas" in row]
        cells = []
        for row in rungs:
            tile = waves.tile_of(row.get("params"))
            M, N = row["size"]["M"], row["size"]["N"]
            where = (f" ({waves.tiles(M, N, *tile):>4} tiles of {tile[0]}x{tile[1]}, "
                     f"{100 * waves.wave_efficiency(M, N, *tile, sms):3.0f} % busy)" if tile else "")
            cells.append(f"{row['stage'][:2]} {row['pct_of_cublas']:5.1f} %{where}")
        order = " > ".join(r["stage"][:2] for r in sorted(rungs, key=lambda r: -r["pct_of_cublas"]))
        print(f"  M = N = K = {x:>4}: " + "   ".join(cells) + f"   order {order}")

# %% [markdown]
# Read the plot and the lines above from left to right.
#
# - **The smallest sizes**: every rung is far from cuBLAS, and the Hopper rungs are out of the ladder's order: rung
#   05, with 128 x 128 tiles and one block per tile, beats 07 and 06, whose 128 x 256 tiles are half as many.
#   At 1024 that is 32 tiles for 132 SMs: three quarters of the GPU idle, however good the pipeline. Rung 05
#   lands where that log's first WGMMA kernel did, near half of cuBLAS. (Below one wave, the share of SMs busy
#   is not the share of cuBLAS reached: cuBLAS is far from its own peak at those sizes too, as its TFLOP/s
#   below shows.)
# - **The larger sizes**: enough tiles for several waves; the rungs are compute-bound and their order is the
#   ladder's, each one above the one before.
# - **`cublas_sgemm`**, dashed, is how far fp32 FMAs get without tensor cores: a few % of bf16 cuBLAS once the
#   problem is large. That is the ceiling of the Numba rungs 01 to 03, and why the benchmark also measures them
#   against SGEMM (the `% of SGEMM` column above).
#
# One caution when you read % of cuBLAS at the largest sizes, where rung 07 comes near cuBLAS in this record: a
# percentage is only as steady as its yardstick. cuBLAS's own TFLOP/s, printed below beside the rungs', moves
# from size to size and from run to run. The benchmark's own record at 8192³ has rung 07 further behind on the
# H100 than this one does. Compare rungs within one run (as every table here does), never across runs.

# %%
for record in sizes.load("gemm"):
    print(f"{record['gpu']}, recorded (commit {record.get('commit') or '?'}): TFLOP/s")
    print(sizes.format_table(sizes.table(record, "TFLOPs")))

# %% [markdown]
# ## Why no one reaches the spec sheet's 989 TFLOP/s: the clock comes down
#
# The tensor cores' dense bf16 rate is 4096 FLOP a clock on each SM (2048 multiply-adds, 512 on each of its
# four tensor cores). The spec sheet gives no clock; 989 TFLOP/s over 132 SMs implies 1,830 MHz, below the
# card's top clock. The card does not hold either while the tensor cores work without a pause: their power
# meets the card's limit, and the clock comes down until the power fits. `tools/probe_clocks.py` runs cuBLAS's
# GEMM back to back for a few seconds and samples the SM clock, the power draw and NVML's reason for the clock
# beside it; each line also gives cuBLAS's share of the tensor cores' rate at the clock it ran at:

# %%
import json

from cudabook import results

REASONS = {0x1: "idle", 0x4: "software power cap", 0x20: "thermal slowdown (software)",
           0x40: "thermal slowdown (hardware)"}
for path in sorted((results.RESULTS / "readings").glob("*_clocks.json")):
    r = json.loads(path.read_text())
    sms = next((rec["machine"].get("sms") for rec in results.load_all()
                if rec.get("gpu") == r["gpu"] and rec.get("machine", {}).get("sms")), None)
    print(f"{r['gpu']} (tools/probe_clocks.py at commit {r['commit']}, {r['date'][:10]}):")
    for run in r["runs"]:
        mhz = run["median_sm_MHz"]
        why = ", ".join(REASONS.get(int(x, 16), x) for x in run["reasons"]) or "none"
        rate = sms * 4096 * mhz / 1e6 if sms and mhz else None
        peak = (f"; the tensor cores' rate at that clock {rate:,.0f} TFLOP/s, cuBLAS {100 * run['TFLOPs'] / rate:.0f} "
                f"% of it") if rate else ""
        who = {"cublas": "cuBLAS"}.get(run.get("kernel", "cublas"), f"rung {run.get('kernel')}")
        print(f"  {run['size']}³ for {run['seconds']:.0f} s: {who} {run['TFLOPs']:,.0f} TFLOP/s, SM clock {mhz:,.0f} MHz "
              f"(median), {run['median_W']:,.0f} W, clock held down by: {why}{peak.replace('cuBLAS', who)}")
        if run.get("kernel", "cublas") != "cublas":
            continue
        size = {"M": run["size"], "N": run["size"], "K": run["size"]}
        for rec in results.load_all():
            for wname, w in rec["workloads"].items():
                cub = w.get("peers", {}).get("cublas", {}).get("TFLOPs")
                if rec.get("gpu") == r["gpu"] and w.get("size") == size and cub:
                    print(f"      the benchmark's record of this card (commit {w.get('commit') or rec.get('commit')}): "
                          f"cuBLAS {cub:,.0f} TFLOP/s, {cub / run['TFLOPs']:.2f}x this probe's")

# %% [markdown]
# Read it against the spec sheet: run without a pause, the SM clock sits well below the 1,830 MHz the spec
# implies, held down by the power cap, and the tensor cores' rate at that clock is already well below 989. The
# clock is not all of the gap: cuBLAS reaches only part of even that lowered rate. In the samples the clock falls
# within the first fraction of a second of load. The workbook's benchmark times short batches with pauses
# between them, and its record of the same card has cuBLAS faster than this probe at both sizes (the lines under
# each size), by much more at 4096³ than at 8192³: most likely a higher clock, at least at 4096³. Which clock it
# ran at was not measured, and the record and the probe are different runs. Both the rung and cuBLAS run
# at whatever clock the card has at that moment, which is one reason a percentage of cuBLAS moves from run to
# run. That is also why `tools/sweep_params.py` times its variants and the peers in six rounds, alternately in
# order and in reverse, and reads each variant against the peer of its own round. (The lessons' own sweeps time
# each value once, in order.) On a card without this record, run the tool: it needs only torch and nvidia-smi.
#
# **Try it.** Measure one rung with another tile width, e.g. (after `from cudabook import results`)
# `results.measure_workload("gemm", dict(M=1024, N=1024, K=1024), stages=["05_wgmma_tma"], params={"05_wgmma_tma": {"bn": 64}})`,
# and compare the wave count with the table above. On a GPU, put other rungs on the plot, e.g. a Numba rung
# beside the Hopper ones: `python tools/sweep_sizes.py --track gemm --stages 03 05 07 --values 256 1024 4096
# --out /tmp/sizes` (then `sizes.show("gemm", folder="/tmp/sizes")`; without `--out` the run replaces the
# card's record in `results/sizes/`).
