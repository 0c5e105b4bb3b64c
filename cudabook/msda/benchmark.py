"""The deformable attention track's benchmark: seed 002's size, two kinds of locations, a ceiling and a reference
kernel measured in the same process, and PyTorch's reference implementation as the peer.

Workloads: N = 48 images, M = 8 heads, the 4-level pyramid (100, 116), (50, 58), (25, 29), (13, 15), P = 8
points, D = 32 channels, Lq = S = 15,420 queries (encoder self-attention); locations "local" (each query
samples around its own pixel, 2-pixel spread: realistic) and "uniform" (anywhere: no locality).

Figures of a row:
    GBps               the minimum traffic (value, locations and weights read once, the output written once) per
                       second, and pct_of_copy: that against the device-to-device copy measured now (the copy
                       ceiling: the minimum traffic at the rate a copy reaches, a bound from DRAM traffic,
                       approximately: a copy's rate is not quite the memory's peak)
    pct_of_ceiling     shown as "% of reference gather" (the key is the first records'): the reference gather's
                       time against the row's. Every sample reads 4 corner pixels of D bf16 (256 bytes at D = 32,
                       48.5 GB in all at this size) through L2 and L1, far more than the minimum traffic. The
                       reference gather loads those pieces, at this workload's addresses (moved onto the map where a
                       sample hangs over its edge), with 16-byte loads and nothing else (no weights, no
                       arithmetic): `reference_gather_us`, its groups in both orders (heads fastest, as rung 02
                       takes them, and head by head, as rung 05 does), the faster kept (records before 2026-11-30
                       timed heads fastest only, and have no "gather_order"). It is a
                       reference kernel, not a bound: it has limits of its own (the loads a lane keeps in
                       flight), and a rung can match or beat it (over 100 %). A bound from the corners' L2 and L1
                       traffic at the hardware's peak rates is not measured.
    speedup_vs_torch   PyTorch eager's time (grid_sample per level, below) against the row's
Every output, the peers' too, is checked against the float64 reference.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, int32

from .checking import judge
from .inputs import SEED_LEVELS, random_problem
from .problem import upload
from .s02_warp_cooperative import WARP, load4

_SEED = dict(N=48, Lq=15420, M=8, levels=SEED_LEVELS, P=8, D=32)
WORKLOADS = [dict(_SEED, locations="local"), dict(_SEED, locations="uniform")]
COLUMNS = [("µs", "median_us", "{:,.1f}"), ("GB/s", "GBps", "{:,.0f}"), ("% of copy", "pct_of_copy", "{:.1f}"),
           ("% of reference gather", "pct_of_ceiling", "{:.1f}"), ("× torch eager", "speedup_vs_torch", "{:.1f}")]
REQUIRED = ("median_us", "GBps", "pct_of_copy", "correct")
PLOT_KEY, PLOT_LABEL = "pct_of_copy", "% of copy bandwidth (minimum traffic)"
SIZE_PLAN = dict(x=("Lq",), values=(1000, 4000, 15420), workloads="first")   # cudabook.sizes: queries per image
# tools/sweep_params.py: the fast rungs' parameters, swept on a GPU at the benchmark's size
SWEEP_VARIANTS = ([("02_warp_cooperative", {}), ("02_warp_cooperative", {"vec_bytes": 8}),
                   ("04_tma_boxes", {}), ("04_tma_boxes", {"strided": True}),
                   ("05_lane_groups", {"threads": 128}), ("05_lane_groups", {"threads": 256}),
                   ("05_lane_groups", {"threads": 512}), ("05_lane_groups", {"threads": 256, "branchless": False})]
                  + [("05_lane_groups", {"threads": t, "vectors": v}) for v in (2, 4) for t in (128, 256, 512)])
GATHER_ORDERS = ("heads fastest", "head by head")   # the reference gather's two orders of its groups
PEERS_FIRST = True           # speed-up against torch needs torch's time


def workload_name(N, Lq, M, levels, P, D, locations="local"):
    return f"msda N={N} Lq={Lq} M={M} L={len(levels)} P={P} D={D} {locations}"


def prepare(size, rng=None):
    """Fresh random inputs of this size, uploaded: (inputs, problem)."""
    args = random_problem(**size, rng=rng or np.random.default_rng())
    return args, upload(*args)


def context(problem, progress=print) -> dict:
    """Both yardsticks, measured now: the copy ceiling for the minimum traffic (a bound, approximately), and the reference
    gather of the corners this problem's samples read (a reference kernel, not a bound: a kernel can beat it).
    The context keys ceiling_GBps and ceiling_how are the first records' names for the reference gather's."""
    from .. import bench
    ceilings = bench.copy_ceilings(problem.min_bytes)
    copy = max(ceilings.values())
    progress(f"copy ceiling: {copy:,.0f} GB/s (read + write of {problem.min_bytes / 1e6:.1f} MB; "
             + ", ".join(f"{k} {v:,.0f}" for k, v in ceilings.items()) + ")")
    ctx = {"copy_GBps": round(copy, 1), "copy_ceilings_GBps": ceilings, "min_bytes": problem.min_bytes,
           "gather_bytes": problem.gather_bytes}
    orders = {order: round(reference_gather_us(problem, heads_outer=order == GATHER_ORDERS[1]), 2)
              for order in GATHER_ORDERS}
    order = min(orders, key=orders.get)                     # the reference at its strongest on this workload
    us = orders[order]
    ctx["gather_us"] = us
    ctx["gather_order"] = order
    ctx["gather_orders_us"] = orders
    ctx["ceiling_GBps"] = round(problem.gather_bytes / (us * 1e-6) / 1e9, 1)
    ctx["ceiling_how"] = ("the reference gather: every sample's 4 corner pixels (D bf16 each) loaded at this "
                          "workload's addresses, 16-byte loads, no arithmetic, its groups in the faster of two "
                          "orders (heads fastest, as rung 02 takes them, or head by head, as rung 05 does), both "
                          "timed now; a reference, not a bound (a kernel can beat it); GB/s of the corner bytes")
    other = ", ".join(f"{k} {v:,.1f} µs" for k, v in orders.items() if k != order)
    progress(f"reference gather: {ctx['ceiling_GBps']:,.0f} GB/s of corner bytes ({problem.gather_bytes / 1e9:.1f} "
             f"GB in {us:,.1f} µs, {order}; {other}; a reference kernel, not a bound)")
    return ctx


def summary(ctx) -> str:
    parts = [f"copy ceiling {ctx['copy_GBps']:,.0f} GB/s"]
    if ctx.get("ceiling_GBps"):
        parts.append(f"reference gather {ctx['ceiling_GBps']:,.0f} GB/s of corners"
                     + (f" ({ctx['gather_order']})" if ctx.get("gather_order") else ""))
    if ctx.get("torch_eager_us"):
        parts.append(f"torch eager {ctx['torch_eager_us']:,.0f} µs")
    return ", ".join(parts)


def metrics(problem, median_us, ctx) -> dict:
    GBps = round(problem.min_bytes / (median_us * 1e-6) / 1e9, 1)
    out = {"GBps": GBps, "pct_of_copy": round(100 * GBps / ctx["copy_GBps"], 1)}
    if ctx.get("gather_us"):
        out["pct_of_ceiling"] = round(100 * ctx["gather_us"] / median_us, 1)
    if ctx.get("torch_eager_us"):
        out["speedup_vs_torch"] = round(ctx["torch_eager_us"] / median_us, 2)
    return out


# ----------------------------------------------------------------------------------------------------------
# The reference gather: the corners alone, no arithmetic (a reference kernel, not a bound)
# ----------------------------------------------------------------------------------------------------------
@cuda.jit
def corner_rows(shapes, starts, loc, rows):
    """rows[n, q, m, l, p]: the row of value of the top-left pixel of the 2 x 2 block that sample reads, moved
    onto the map where it hangs over an edge (the same addresses but for border samples)."""
    N, Lq, M, L, P = rows.shape
    i = cuda.grid(1)
    if i >= N * Lq * M * L * P:
        return
    p = i % P
    l = (i // P) % L
    m = (i // (P * L)) % M
    q = (i // (P * L * M)) % Lq
    n = i // (P * L * M * Lq)
    H = shapes[l, 0]
    W = shapes[l, 1]
    x = min(max(loc[n, q, m, l, p, 0] * float32(W) - float32(0.5), float32(0.0)), float32(W - 1))
    y = min(max(loc[n, q, m, l, p, 1] * float32(H) - float32(0.5), float32(0.0)), float32(H - 1))
    x0 = min(int32(math.floor(x)), max(W - 2, 0))
    y0 = min(int32(math.floor(y)), max(H - 2, 0))
    rows[n, q, m, l, p] = starts[l] + y0 * W + x0


@cuda.jit(device=True, forceinline=True)
def fold_vector(words, n, r, i):
    """The four words of one 16-byte load, XORed together."""
    a, b, c, d = load4(words, n, r, i)
    return a ^ b ^ c ^ d


@cuda.jit
def gather_corners(words, shapes, rows, sink, lanes, heads_outer):
    """Groups of `lanes` lanes per (n, q, m) as in rung 02, each lane one 16-byte vector of the head's row: every
    sample's four corners loaded and folded by XOR into one word a lane (stored, so no load is dead). The groups
    are taken heads fastest, as rung 02 takes them, or with `heads_outer` head by head (queries fastest), as rung
    05 takes them; either way group (n, q, m) stores its fold at the same place."""
    N, Lq, M, L, P = rows.shape
    nvec = words.shape[2] // 4
    lane = cuda.threadIdx.x % WARP
    g = lane % lanes
    order = cuda.grid(1) // lanes
    if order >= N * Lq * M or g >= nvec:
        return                                     # no shuffles here: lanes may leave on their own
    if heads_outer:
        q = order % Lq
        m = (order // Lq) % M
    else:
        m = order % M
        q = (order // M) % Lq
    n = order // (M * Lq)
    group = (n * Lq + q) * M + m
    i = g * 4
    fold = np.uint32(0)
    for l in range(L):
        W = shapes[l, 1]
        right = 1 if W > 1 else 0
        down = W if shapes[l, 0] > 1 else 0
        for p in range(P):
            top = rows[n, q, m, l, p]
            fold ^= fold_vector(words, n, top * M + m, i)
            fold ^= fold_vector(words, n, (top + right) * M + m, i)
            fold ^= fold_vector(words, n, (top + down) * M + m, i)
            fold ^= fold_vector(words, n, (top + down + right) * M + m, i)
    sink[group * lanes + g] = fold


def _gather_launch(problem, heads_outer=False):
    N, S, M, D, Lq, L, P = problem.shape
    rows = cuda.device_array((N, Lq, M, L, P), np.int32)
    count = rows.size
    corner_rows[(count + 255) // 256, 256](problem.shapes, problem.starts, problem.loc, rows)
    words, _ = problem.words()
    nvec = D // 8
    lanes = 1 << max(0, math.ceil(math.log2(nvec)))
    groups = N * Lq * M
    sink = cuda.device_array(groups * lanes, np.uint32)
    threads = 128
    blocks = (groups * lanes + threads - 1) // threads
    order = np.int32(bool(heads_outer))
    return rows, sink, (lambda: gather_corners[blocks, threads](words, problem.shapes, rows, sink, np.int32(lanes),
                                                                order))


def gather_fold(problem, heads_outer=False):
    """Run the gather once; its sink [N * Lq * M * lanes] (the XOR of every corner vector a lane read)."""
    rows, sink, go = _gather_launch(problem, heads_outer)
    go()
    return sink.copy_to_host()


def reference_gather_us(problem, repeats=25, heads_outer=False) -> float:
    """Median µs of the reference gather on this problem's samples (GPU only): every sample's 4 corners loaded,
    no arithmetic. A reference, not a bound: a kernel that also does the arithmetic can match or beat it.
    `heads_outer`: its groups head by head. context() times both orders and keeps the faster; which one wins
    depends on the workload (tools/probe_reference_gather.py times both beside rung 05)."""
    from .. import bench
    rows, sink, go = _gather_launch(problem, heads_outer)
    return bench.time_ms(go, repeats=repeats, batch=5) * 1e3


# ----------------------------------------------------------------------------------------------------------
# The peer: Deformable DETR's PyTorch reference, ms_deform_attn_core_pytorch, in our own words
# ----------------------------------------------------------------------------------------------------------
def msda_torch(value, levels, loc, attn):
    """The sampling as Deformable DETR's pure-PyTorch fallback does it: for each level, one grid_sample over all
    images and heads at once (each head's D channels as an image of D planes), then the weighted sum of the
    L * P samples. value [N, S, M, D], levels [(H, W)], loc [N, Lq, M, L, P, 2], attn [N, Lq, M, L, P]
    -> [N, Lq, M * D]."""
    import torch
    import torch.nn.functional as F
    N, S, M, D = value.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    maps = value.split([h * w for h, w in levels], dim=1)
    grid = 2 * loc - 1                                              # grid_sample's coordinates run from -1 to 1
    taken = []
    for l, (h, w) in enumerate(levels):
        planes = maps[l].permute(0, 2, 3, 1).reshape(N * M, D, h, w)             # [N*M, D, H, W]
        where = grid[:, :, :, l].permute(0, 2, 1, 3, 4).reshape(N * M, Lq, P, 2)   # [N*M, Lq, P, (x, y)]
        taken.append(F.grid_sample(planes, where, mode="bilinear", padding_mode="zeros", align_corners=False))
    weights = attn.permute(0, 2, 1, 3, 4).reshape(N * M, 1, Lq, L * P)
    summed = (torch.stack(taken, dim=-2).flatten(-2) * weights).sum(-1)          # [N*M, D, Lq]
    return summed.view(N, M * D, Lq).transpose(1, 2).contiguous()


def _torch_inputs(args, images):
    """The inputs on the GPU as torch tensors (value widened to float32), for images [images]."""
    import torch
    value, shapes, starts, loc, attn = args
    dev = torch.device("cuda")
    bits = np.ascontiguousarray(np.asarray(value)[images]).view(np.uint16).view(np.int16)
    v = torch.from_numpy(bits).to(dev).view(torch.bfloat16).float()      # Deformable DETR runs in float32
    levels = [(int(h), int(w)) for h, w in np.asarray(shapes)]
    return v, levels, torch.from_numpy(loc[images]).to(dev), torch.from_numpy(attn[images]).to(dev)


def _measure_peer(fn, args, repeats, at_once):
    """Time fn over all N images, `at_once` images a call (the chunks queued back to back), and check its output
    (all chunks, brought back to the host) against the float64 reference."""
    import torch

    from .. import bench
    N = np.shape(args[0])[0]
    chunks = [_torch_inputs(args, slice(i, min(i + at_once, N))) for i in range(0, N, at_once)]
    parts = [fn(*c).to(torch.bfloat16).view(torch.int16).cpu().numpy() for c in chunks]   # compiles, warms up
    correct = judge(np.concatenate(parts).view(np.uint16), *args).ok
    del parts

    def run_all():
        for c in chunks:
            fn(*c)
    ms = bench.time_ms(run_all, repeats=repeats, batch=1)
    row = {"median_us": round(ms * 1e3, 2), "correct": correct}
    if at_once < N:
        row["images_at_once"] = at_once
    return row


def peer_bytes(args) -> tuple[int, int]:
    """(bytes a peer holds for all N images, bytes one image adds while a call runs), for msda_torch on these
    inputs. Held: torch's float32 copies of value, the locations and the weights, every image's. A call, per
    image: grid_sample's samples of every level (T = M D Lq L P float32; a record's out-of-memory message at
    N = 48 asked for exactly 48 T: "Tried to allocate 22.59 GiB"), their stack and the weighted product (T each,
    alive together: 3 T), and the per-level copies of value, the grid and the weights, and the output. Used for
    torch.compile too, where it is more than enough: its out-of-memory message in the same record asked for one
    level's samples only (48 T / L: "Tried to allocate 5.65 GiB")."""
    value, shapes, starts, loc, attn = args
    N, S, M, D = np.shape(value)
    Lq, L, P = np.shape(loc)[1], np.shape(loc)[3], np.shape(loc)[4]
    v, xy, w = S * M * D * 4, Lq * M * L * P * 2 * 4, Lq * M * L * P * 4
    out = Lq * M * D * 4
    return N * (v + xy + w), 3 * M * D * Lq * L * P * 4 + v + 2 * xy + w + 2 * out


PEERS = ("torch_eager", "torch_compile", "torch_compile_max_autotune")
# torch.compile's modes: the default, and the strongest a user would pick (max-autotune without CUDA graphs: the
# timing already queues the calls back to back)
COMPILE_MODES = {"torch_compile": None, "torch_compile_max_autotune": "max-autotune-no-cudagraphs"}
LESSON_PEERS = ("torch_eager",)   # what a lesson measures now; torch.compile (slower than eager on this problem in
# the records, and compiled anew in every process) comes from the card's record, unless the lesson measures the
# whole ladder (cudabook.lesson, full=True)


def peers(args, problem, ctx, *, repeats=25, progress=print, only=None) -> dict:
    """PyTorch eager and torch.compile of msda_torch (its default mode and max-autotune-no-cudagraphs; only: those
    named) on the same data, timed the same way (skipped, saying why, without torch). A call takes as many images as
    the memory the lesson may use holds (cudabook.peers: a third of the card, less the workload's own inputs and
    output, and no more than is free now; peer_bytes counts it): at seed 002's size some 1.5 GiB an image, so all N
    = 48 at once would not fit; the peer then runs on chunks of images back to back over all N, and the row says how
    many a call (images_at_once). Nothing is tried that does not fit: a peer for which not even one image fits is
    skipped, saying so."""
    from .. import peers as peer_mod
    if peer_mod.skipped(progress):
        return {}
    import torch
    N = np.shape(args[0])[0]
    held, per_image = peer_bytes(args)
    budget = peer_mod.memory_budget(getattr(problem, "min_bytes", 0))
    rows = {}
    for name in PEERS:
        if only is not None and name not in only:
            continue
        at_once = peer_mod.at_once(N, per_image, budget, fixed=held)
        if not at_once:
            rows[name] = {"skipped": f"not run: one image a call needs {peer_mod.gib(held + per_image)} (with every "
                                     f"image's inputs); this lesson may take {peer_mod.gib(budget)} of the GPU now"}
            progress(f"{name}: {rows[name]['skipped']}")
            continue
        progress(f"{name}: {at_once} of {N} images a call ({peer_mod.gib(held + at_once * per_image)} of the "
                 f"{peer_mod.gib(budget)} this lesson may take)" + (", compiling first …" if name in COMPILE_MODES
                                                                     else " …"))
        fn = (msda_torch if name == "torch_eager"
              else torch.compile(msda_torch, dynamic=False, mode=COMPILE_MODES[name]))
        try:
            rows[name] = _measure_peer(fn, args, min(repeats, 10), at_once)
        except Exception as e:  # a peer that fails is reported, not fatal
            rows[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        del fn
        peer_mod.release()                     # outside the except block: a failed call's tensors went with it
        progress(f"{name}: {rows[name]}")
    if "median_us" in rows.get("torch_eager", {}):
        ctx["torch_eager_us"] = rows["torch_eager"]["median_us"]
    for v in rows.values():
        if "median_us" in v:
            v.update(metrics(problem, v["median_us"], ctx))
    return rows


def consistency(row, workload, record) -> str | None:
    """Why a row's figures disagree with its own time, or None: GB/s from µs and the minimum traffic, % of copy
    from the copy ceiling, % of reference gather from the reference gather's time, the speed-up from torch
    eager's time in the same workload (each as rounded when recorded)."""
    ctx = workload.get("context", {})
    nbytes, copy = ctx.get("min_bytes"), ctx.get("copy_GBps") or record.get("copy_GBps")
    us = row["median_us"]
    if nbytes and "GBps" in row:
        want = nbytes / (us * 1e-6) / 1e9
        if abs(row["GBps"] - want) > 0.06 + 1e-3 * want:
            return f"GBps {row['GBps']} but {nbytes:,} bytes in {us} µs is {want:.1f} GB/s"
    if copy and "pct_of_copy" in row and "GBps" in row:
        want = 100 * row["GBps"] / copy
        if abs(row["pct_of_copy"] - want) > 0.06 + 1e-3 * want:
            return f"pct_of_copy {row['pct_of_copy']} but {row['GBps']} GB/s of a {copy} GB/s ceiling is {want:.1f} %"
    if ctx.get("gather_us") and "pct_of_ceiling" in row:
        want = 100 * ctx["gather_us"] / us
        if abs(row["pct_of_ceiling"] - want) > 0.06 + 1e-3 * want:
            return (f"pct_of_ceiling (% of reference gather) {row['pct_of_ceiling']} but the reference gather "
                    f"took {ctx['gather_us']} µs against "
                    f"{us} µs: {want:.1f} %")
    torch_us = workload.get("peers", {}).get("torch_eager", {}).get("median_us")
    if torch_us and "speedup_vs_torch" in row:
        want = torch_us / us
        if abs(row["speedup_vs_torch"] - want) > 0.006 + 1e-3 * want:
            return f"speedup_vs_torch {row['speedup_vs_torch']} but torch eager took {torch_us} µs against {us} µs"
    return None
