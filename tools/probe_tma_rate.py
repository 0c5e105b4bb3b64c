"""How many SM cycles the TMA unit spends a box, by box shape and by boxes in flight (Hopper GPU; the kernel is
tools/probe_tma_rate.cu).

Deformable attention's rung 04 loads every sample's four corners as one 256-byte TMA box, four 64-byte pieces,
and spends about 8 ns an SM a sample on an H200 (lesson 04 prints it from the record; at most one box a sample),
some 16 SM cycles at a 2 GHz clock. Is that the TMA unit's own rate for such boxes, or something else in the
kernel? This probe issues nothing but boxes: one warp a block, ISSUERS lanes each keeping RING boxes in flight,
every box at a random place of a 2-D bf16 tensor, nothing reading them, and reports the cycles a box costs an
SM (each block's clock64) and the nanoseconds (the wall time of the whole grid, by CUDA events), for each box
shape, count of issuers and blocks an SM. The tensor is small enough to stay in the L2 (16 MB: the rate of the
unit, not of DRAM) or, with --span dram, 1 GB.

    python tools/probe_tma_rate.py                                   # the default grid of settings, on a GPU
    python tools/probe_tma_rate.py --boxes 32x4 128x1 --issuers 1 32 --ring 4 8 --per-sm 1 2
    python tools/probe_tma_rate.py --emulate                         # no GPU: every setting checked in the
                                                                     # CPU emulator at a tiny size, untimed

Writes results/readings/<gpu>_msda_04_tma_boxes_tma_rate.json (--out: another folder), which lesson 04 of the
deformable-attention track prints. Every setting's boxes are checked (the last box of every issuer, element by
element, against the tensor's pattern): a wrong one is reported, not timed.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import pathlib
import statistics
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from cudabook import device, nvrtc, results  # noqa: E402  (decides simulator or GPU before numba is imported)

SOURCE = pathlib.Path(__file__).with_suffix(".cu")
KERNEL = "tma_rate"
TYPES = (None, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p)
BOXES = ("32x4", "32x1", "64x2", "128x1", "128x2", "64x64")   # width (bf16) x rows: msda's box, a piece, ...,
#                                                             GEMM's 8 KiB box of B
SPANS = {"l2": (4096, 2048), "dram": (8192, 65536)}           # (rows, cols) of bf16: 16 MB, 1 GB


def box_shape(text: str) -> tuple[int, int]:
    """"32x4" -> (32, 4): a box's width in bf16 and its rows; ValueError naming the rule otherwise."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"a box is WIDTHxROWS (bf16 elements x rows), like 32x4; got {text!r}") from None
    if not (8 <= w <= 256 and w % 8 == 0 and 1 <= h <= 256):
        raise ValueError(f"box {text}: the width must be a multiple of 8 from 8 to 256 (16-byte rows, at most 256 "
                         f"elements a box dimension) and the rows 1 to 256")
    return w, h


def smem_bytes(w: int, h: int, issuers: int, ring: int) -> int:
    """Mirrors SMEM_BYTES in probe_tma_rate.cu."""
    slot = (w * h * 2 + 127) // 128 * 128
    return issuers * ring * slot + issuers * ring * 8 + 128


def pattern(rows: int, cols: int) -> np.ndarray:
    """The tensor: element (y, x) holds (y * cols + x) mod 2^16, the value the kernel checks the boxes against."""
    return np.arange(rows * cols, dtype=np.uint64).astype(np.uint16).reshape(rows, cols)


class _Map:
    """A tensor map passed by value (the launch reads getPtr())."""

    def __init__(self, m):
        from cudabook import tma
        self.m = m
        self.buffer = (ctypes.c_ubyte * 128).from_buffer_copy(tma.tensor_map_bytes(m))

    def getPtr(self):
        return ctypes.addressof(self.buffer)


def run_setting(tensor, w, h, issuers, ring, blocks, boxes, seed=1234, timed=True, per_sm=None) -> dict:
    """One setting on the uploaded `tensor` (a device array [rows, cols] of uint16): checked, then (timed) its
    wall time by CUDA events over repeated launches and each block's cycles from the last launch. per_sm (timed):
    the blocks an SM must hold at once for the rates to mean what they say; where the driver says fewer fit, an
    error row, not a time (the grid would run in waves)."""
    from numba import cuda

    from cudabook import bench, tma
    rows, cols = tensor.shape
    smem = smem_bytes(w, h, issuers, ring)
    defines = dict(BOX_W=w, BOX_H=h, ISSUERS=issuers, RING=ring)
    kernel = nvrtc.load(nvrtc.compile(SOURCE.read_text(), name=SOURCE.name, defines=defines), KERNEL)
    if smem > 48 * 1024:
        optin = device.gpu().smem_per_block_optin
        if smem > optin:
            return {"error": f"{smem:,} bytes of shared memory a block; this GPU allows {optin:,}"}
        kernel.set_max_dynamic_shared(smem)
    if timed and per_sm:
        fit = kernel.blocks_per_sm(32, smem)
        if fit < per_sm:
            return {"error": f"{per_sm} blocks an SM asked for, {fit} fit ({smem:,} bytes of shared memory each)"}
    m = _Map(tma.encode_tiled("bfloat16", (rows, cols), (cols * 2, 2), (h, w), device.address(tensor)))
    cycles = cuda.to_device(np.zeros(blocks, np.int64))
    wrong = cuda.to_device(np.zeros(1, np.uint32))
    args = [m, boxes, cols, rows, seed, device.address(cycles), device.address(wrong)]

    def launch():
        kernel.launch((blocks, 1, 1), (32, 1, 1), args, TYPES, shared=smem)
    launch()
    bad = int(wrong.copy_to_host()[0])
    if bad:
        return {"error": f"{bad} elements of the checked boxes differ from the tensor"}
    if not timed:
        return {"checked": True}
    ms = bench.time_ms(launch, repeats=15, batch=3)
    per_block = cycles.copy_to_host()
    return {"ms": round(ms, 4), "block_cycles_median": int(statistics.median(per_block.tolist())),
            "block_cycles_max": int(per_block.max())}


def describe(row: dict, sms: int) -> dict:
    """A timed row's rates: the cycles a box costs an SM by the blocks' own clocks (the median block; an SM's
    `per_sm` blocks side by side), the nanoseconds a box by the wall time (all the grid's boxes over the SMs),
    the bytes a nanosecond an SM, and the SM clock the two imply (the longest block's cycles over the time of a
    launch: a little low, since a launch is longer than its blocks)."""
    per_sm = row["boxes"] * row["issuers"] * row["blocks"] / sms
    ns = row["ms"] * 1e6
    return {"block_cycles_per_box_per_sm": round(row["block_cycles_median"] / (row["boxes"] * row["issuers"]
                                                                               * row["per_sm"]), 2),
            "ns_per_box_per_sm": round(ns / per_sm, 3),
            "box_bytes_per_ns_per_sm": round(per_sm * row["box_bytes"] / ns, 2),
            "implied_sm_clock_mhz": round(row["block_cycles_max"] / ns * 1e3)}


def settings(a) -> list[tuple]:
    return [(box_shape(b), i, r, p) for b in a.boxes for i in a.issuers for r in a.ring for p in a.per_sm]


def emulate_all(a) -> int:
    """Every setting once in the CPU emulator, at a tiny size, untimed: the kernel's boxes land where it says."""
    from cudabook import emulate
    failed = 0
    tensor = pattern(40, 512)
    from numba import cuda
    with emulate.emulating():
        d = cuda.to_device(tensor)
        for (w, h), issuers, ring, per_sm in settings(a):
            if h > tensor.shape[0] or w > tensor.shape[1]:
                continue
            got = run_setting(d, w, h, issuers, ring, blocks=2 * per_sm, boxes=2 * ring + 1, timed=False)
            failed += "error" in got
            print(f"box {w}x{h}, {issuers} issuers, ring {ring}: {got.get('error', 'the boxes landed right')}")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boxes", nargs="+", default=list(BOXES), help="box shapes, WIDTHxROWS (bf16 x rows)")
    ap.add_argument("--issuers", nargs="+", type=int, default=[1, 8, 32], help="lanes of a block issuing boxes")
    ap.add_argument("--ring", nargs="+", type=int, default=[4], help="boxes in flight per issuing lane")
    ap.add_argument("--per-sm", nargs="+", type=int, default=[1, 4, 16, 32],
                    help="blocks an SM (one warp each; rung 04 runs 12 blocks, so 12 producer warps, an SM)")
    ap.add_argument("--count", type=int, default=2048, help="boxes each issuing lane issues")
    ap.add_argument("--span", choices=sorted(SPANS), default="l2", help="l2: a 16 MB tensor; dram: 1 GB")
    ap.add_argument("--emulate", action="store_true", help="no GPU: check every setting in the CPU emulator")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="folder of the reading (results/readings)")
    a = ap.parse_args(argv)
    try:
        settings(a)
    except ValueError as e:
        print(e)
        return 2
    if a.emulate:
        return emulate_all(a)
    from cudabook.kit.rung import hopper_unavailable
    why = hopper_unavailable("tools/probe_tma_rate.py")
    if why:
        print(why)
        return 1
    from numba import cuda
    g = device.gpu()
    rows, cols = SPANS[a.span]
    tensor = cuda.to_device(pattern(rows, cols))
    out_rows = []
    for (w, h), issuers, ring, per_sm in settings(a):
        row = {"box": f"{w}x{h}", "box_bytes": w * h * 2, "issuers": issuers, "ring": ring, "per_sm": per_sm,
               "blocks": g.sms * per_sm, "boxes": a.count}
        row.update(run_setting(tensor, w, h, issuers, ring, row["blocks"], a.count, per_sm=per_sm))
        if "ms" in row:
            row.update(describe(row, g.sms))
        out_rows.append(row)
        print(row, flush=True)
    record = {"gpu": g.name, "track": "msda", "stage": "04_tma_boxes", "commit": results._commit(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "nvrtc": nvrtc.nvrtc_version(), "sms": g.sms, "span": a.span, "tensor": [rows, cols],
              "runs": out_rows}
    print("wrote", results.write_reading(record, "tma_rate", a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
