"""How many bytes an SM's L1 hands a gather a cycle, by the size of the pieces it reads from each line (GPU; the
kernel is tools/probe_l1_gather.cu).

Lesson 05 of the deformable-attention track bounds every kernel that loads its corners with `ld.global` by the
L1's data pipe: at most one wavefront a cycle an SM, at most 128 bytes a wavefront. A corner is 64 bytes of a
line of its own, so whether the L1 serves two such corners in one wavefront or needs one for each decides whether
that bound is twice or once the corners' bytes; the lesson's Nsight Compute count could not tell. This probe
measures it: lanes load 16 bytes each, G = piece / 16 lanes read one piece of a 128-byte line (by default at the
line's first byte; `16s`, `32s`, `64s`: each group's piece at another place of its line, as rung 05's corners of
heads 2k and 2k + 1 sit in the first and second half of theirs), every piece at a random line of a region that sits in the L1 (`l1`: each block its own region, read once first) or that only the
L2 holds (`l2`: one region for all blocks, larger than the L1), or of the block's own region copied into its
shared memory (`smem`: the same pieces with 16-byte shared loads, from 32 banks of 4 bytes; what a kernel that
stages its corners in shared memory pays to read them). For each piece size (`64p`: two groups read the
two 64-byte halves of one line) it reports the bytes an SM receives a cycle (the blocks' own clock64) and a
nanosecond (the wall time of the grid, by CUDA events), and the cycles a warp's load instruction costs an SM.

    python tools/probe_l1_gather.py                      # every piece size and both spans, on a GPU
    python tools/probe_l1_gather.py --pieces 64 128 --span l1
    python tools/probe_l1_gather.py --emulate            # no GPU: every setting checked in the CPU emulator
    python tools/probe_l1_gather.py --pieces 64 --span l1 regs --shuffles 0 2 8   # do shuffles and loads share?

`--shuffles S` adds S warp shuffles of each loaded vector (pairs that undo each other), and the span `regs` takes
the loads away: loads alone, shuffles alone and both together, each timed the same way. If the two add up, they
share a unit (the L1's data pipe, whose wavefronts lesson 05's profiles count); if the slower one alone sets the
pace, they do not. That reading goes to results/readings/<gpu>_msda_05_lane_groups_l1_shuffles.json.

Every setting is first run for a few rounds and each thread's XOR of the words it loaded compared with the host's
own replay of the same random lines: a probe that reads other bytes than it says is reported, not timed. Writes
results/readings/<gpu>_msda_05_lane_groups_l1_gather.json (--out: another folder), which lesson 05 prints.
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
KERNEL = "l1_gather"
TYPES = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
         ctypes.c_void_p)
PIECES = ("16", "16s", "32", "32s", "64", "64s", "64p", "128")
SPANS = {"l1": 256, "l2": 1 << 17,      # lines a region: 32 KiB a block (in the L1), or 16 MiB shared (the L2's),
         "smem": 256,                   # or the block's 32 KiB copied into its shared memory (LDS, 32 banks),
         "regs": 256}                   # or no loads at all (each "load" a register): the shuffles alone
OWN_REGION = ("l1", "smem")             # the spans where each block reads a region of its own
LINE = 128
SEED = 0x2545F491


def piece(text: str) -> tuple[int, int, int]:
    """"64p" -> (64, 1, 0): the bytes a group reads, whether two groups share a line, and whether the groups'
    pieces sit at successive places of their lines ("s", spread) instead of every one at its line's first byte;
    ValueError otherwise."""
    paired, spread = text.endswith("p"), text.endswith("s")
    try:
        size = int(text[:-1] if paired or spread else text)
    except ValueError:
        size = 0
    if size not in (16, 32, 64, 128) or (paired and size != 64) or (spread and size == 128):
        raise ValueError(f"a piece is 16, 32, 64 or 128 (bytes a group of lanes reads from one line); 64p (two "
                         f"groups, one 64-byte half of a line each); 16s, 32s or 64s (each group's piece at "
                         f"another place of its line); got {text!r}")
    return size, int(paired), int(spread)


def pattern(words: int) -> np.ndarray:
    """The data: word i holds a hash of i, so that a load from the wrong place changes the XOR."""
    return (np.arange(words, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32)


def replay(data: np.ndarray, blocks: int, threads: int, size: int, paired: int, region_lines: int,
           block_stride: int, rounds: int, unroll: int, seed: int = SEED, spread: int = 0,
           no_loads: bool = False) -> np.ndarray:
    """Each thread's XOR of the words it loads in the timed rounds, computed as the kernel does (`no_loads`: of the
    LCG states that stand in for them; the shuffles, in pairs, change nothing)."""
    g = size // 16
    tid = np.arange(blocks * threads, dtype=np.uint64)
    block, lane = tid // threads, tid % 32
    warp = block * (threads // 32) + (tid % threads) // 32
    group = lane // g
    mask = 0xFFFFFFFF
    state = (seed ^ ((warp * 0x9E3779B9) & mask) ^ (((group >> paired) * 0x85EBCA6B) & mask)) & mask
    within = ((group & 1) * 4 if paired else (group * g) % 8 if spread else 0) + lane % g
    base = block * block_stride * 8
    vecs = data.reshape(-1, 4)
    acc = np.zeros(tid.size, dtype=np.uint32)
    for _ in range(rounds * unroll):
        state = (state * 1664525 + 1013904223) & mask
        if no_loads:
            acc ^= state.astype(np.uint32)
            continue
        v = vecs[(base + ((state >> 8) & (region_lines - 1)) * 8 + within).astype(np.int64)]
        acc ^= v[:, 0] ^ v[:, 1] ^ v[:, 2] ^ v[:, 3]
    return acc


def run_setting(d_data, host_data, size, paired, span, threads, blocks, rounds, unroll, timed=True, spread=0,
                shuffles=0) -> dict:
    """One setting: checked over 2 rounds against the host's replay, then (timed) the wall time of `rounds`
    rounds by CUDA events and each block's cycles from the last launch."""
    from numba import cuda

    from cudabook import bench
    region = SPANS[span]
    stride = region if span in OWN_REGION else 0
    kernel = nvrtc.load(nvrtc.compile(SOURCE.read_text(), name=SOURCE.name,
                                      defines=dict(PIECE=size, PAIRED=paired, SPREAD=spread, UNROLL=unroll,
                                                   SHARED=int(span == "smem"), SHUFFLES=shuffles,
                                                   NO_LOADS=int(span == "regs"))),
                         KERNEL)
    cycles = cuda.to_device(np.zeros(blocks, np.int64))
    sums = cuda.to_device(np.zeros(2 * blocks * threads, np.uint32))

    def launch(n):
        args = [device.address(d_data), region, stride, n, SEED, device.address(cycles), device.address(sums)]
        kernel.launch((blocks, 1, 1), (threads, 1, 1), args, TYPES)
    launch(2)
    got = sums.copy_to_host()[:blocks * threads]
    want = replay(host_data, blocks, threads, size, paired, region, stride, 2, unroll, spread=spread,
                  no_loads=span == "regs")
    if not np.array_equal(got, want):
        return {"error": f"{int((got != want).sum())} of {blocks * threads} threads loaded other words than the "
                         f"replay"}
    if not timed:
        return {"checked": True}
    ms = bench.time_ms(lambda: launch(rounds), repeats=15, batch=3)
    per_block = cycles.copy_to_host()
    return {"ms": round(ms, 4), "block_cycles_median": int(statistics.median(per_block.tolist())),
            "block_cycles_max": int(per_block.max())}


def describe(row: dict, sms: int) -> dict:
    """A timed row's rates: bytes an SM a cycle (the median block's clock, its SM's per_sm blocks side by side),
    bytes an SM a nanosecond (the whole grid's loads over the SMs, by the wall time), and the cycles one load
    instruction of a warp costs an SM; the pieces and the distinct lines an SM receives a cycle."""
    per_block = row["threads"] * row["rounds"] * row["unroll"] * 16
    cycles = row["block_cycles_median"]
    warp_loads = row["per_sm"] * row["threads"] // 32 * row["rounds"] * row["unroll"]
    return {"bytes_per_cycle_per_sm": round(row["per_sm"] * per_block / cycles, 2),
            "bytes_per_ns_per_sm": round(per_block * row["blocks"] / sms / (row["ms"] * 1e6), 2),
            "cycles_per_warp_load": round(cycles / warp_loads, 3),
            "pieces_per_cycle_per_sm": round(row["per_sm"] * per_block / row["piece_bytes"] / cycles, 3),
            "lines_per_cycle_per_sm": round(row["per_sm"] * per_block / (LINE if row["paired"] else row["piece_bytes"])
                                            / cycles, 3),
            "shuffles_per_cycle_per_sm": round(warp_loads * row.get("shuffles", 0) / cycles, 3)}


def settings(a) -> list[tuple]:
    """(piece, span, shuffles) for every setting asked for; without loads (the regs span) one piece is enough.
    ValueError for a piece that is not one, or an odd or negative number of shuffles."""
    bad = [k for k in a.shuffles if k < 0 or k % 2]
    if bad:
        raise ValueError(f"--shuffles: even numbers of shuffles a load (pairs that undo each other), got {bad}")
    kept = {}                                                  # (in the order asked, each setting once)
    for k in a.shuffles:
        for s in a.span:
            for p in a.pieces:
                if not (s == "regs" and k == 0):               # nothing at all to time
                    kept.setdefault((s, k) if s == "regs" else (p, s, k), (piece(p), s, k))
    return list(kept.values())


def label(size: int, paired: int, spread: int) -> str:
    """A piece's name as --pieces takes it: 64, 64p, 64s."""
    return f"{size}{'p' if paired else 's' if spread else ''}"


def emulate_all(a) -> int:
    """Every setting in the CPU emulator, at a tiny size, untimed: each thread loads the words the replay says."""
    from numba import cuda

    from cudabook import emulate
    failed = 0
    with emulate.emulating():
        for (size, paired, spread), span, shuffles in settings(a):
            region = SPANS[span] if span in OWN_REGION else 512    # a small shared region stands in for the L2's
            saved = SPANS[span]
            SPANS[span] = region
            try:
                host = pattern(2 * max(region, SPANS["l1"]) * LINE // 4)
                got = run_setting(cuda.to_device(host), host, size, paired, span, 64, 2, 2, 2, timed=False,
                                  spread=spread, shuffles=shuffles)
            finally:
                SPANS[span] = saved
            failed += "error" in got
            print(f"piece {label(size, paired, spread)}, {span}, {shuffles} shuffles: "
                  f"{got.get('error', 'every thread loaded its words')}")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pieces", nargs="+", default=list(PIECES), help="bytes a group reads from one line (64p: paired; 16s, 32s, 64s: spread)")
    ap.add_argument("--span", nargs="+", choices=sorted(SPANS), default=["l1", "l2", "smem"])
    ap.add_argument("--threads", type=int, default=1024, help="threads a block")
    ap.add_argument("--per-sm", type=int, default=1, help="blocks an SM (one: its clock is the SM's)")
    ap.add_argument("--rounds", type=int, default=512, help="rounds of UNROLL loads a lane")
    ap.add_argument("--unroll", type=int, default=8, help="independent loads a lane a round")
    ap.add_argument("--shuffles", nargs="+", type=int, default=[0],
                    help="warp shuffles of each loaded vector, even (with the span regs: shuffles without loads); "
                         "anything but 0 writes the reading l1_shuffles, not l1_gather")
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
    g = device.gpu()
    if g is None:
        print(f"tools/probe_l1_gather.py times a GPU's L1, and there is none here ({device.why_no_gpu()}); "
              f"--emulate checks the probe in the CPU emulator")
        return 1
    from numba import cuda
    blocks = g.sms * a.per_sm
    host = pattern(max(blocks * SPANS["l1"], SPANS["l2"]) * LINE // 4)
    d_data = cuda.to_device(host)
    rows = []
    for (size, paired, spread), span, shuffles in settings(a):
        row = {"piece": label(size, paired, spread), "piece_bytes": size,
               "paired": bool(paired), "spread": bool(spread),
               "span": span, "region_bytes": SPANS[span] * LINE, "threads": a.threads, "per_sm": a.per_sm,
               "blocks": blocks, "rounds": a.rounds, "unroll": a.unroll, "shuffles": shuffles}
        row.update(run_setting(d_data, host, size, paired, span, a.threads, blocks, a.rounds, a.unroll,
                               spread=spread, shuffles=shuffles))
        if "ms" in row:
            row.update(describe(row, g.sms))
        rows.append(row)
        print(row, flush=True)
    record = {"gpu": g.name, "track": "msda", "stage": "05_lane_groups", "commit": results._commit(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "nvrtc": nvrtc.nvrtc_version(), "sms": g.sms, "runs": rows}
    kind = "l1_shuffles" if any(a.shuffles) else "l1_gather"
    print("wrote", results.write_reading(record, kind, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
