"""Multi-scale deformable attention's inputs: validation that names the argument and the rule, random problems
(realistic and uniform), the float64 reference and the tolerance the checker allows.

    out[n, q, m*D + d] = sum over levels l and points p of
        attention_weights[n, q, m, l, p] * bilinear(level l of value[n, :, m, d], sampling_locations[n, q, m, l, p])

value bf16 [N, S, M, D] holds L feature maps one after the other: level l is H_l x W_l pixels, row-major, from
row level_start_index[l] on (S = sum of H_l * W_l). A location (x, y) is normalized: x = 0 is the left edge of
the map and x = 1 its right edge. The sample is grid_sample's with align_corners=False and zero padding: the
pixel position is (x * W - 0.5, y * H - 0.5), so pixel centres sit at (i + 0.5) / W; the four pixels around it
are weighted bilinearly, and a pixel off the map reads as zero. Locations outside [0, 1] are allowed (they
fade to zero half a pixel past the edge).

The tolerance, per output element, from the arithmetic of an fp32 kernel (bf16 values are exact in fp32,
locations and weights are given in fp32 and so exact in the float64 reference):

    |got - ref| <= half a bf16 ulp of max(|ref|, |got|)                  the one rounding of the output
                 + (4 L P + 8) * 2^-24 * sum |a * w_corner * v|         fp32 products and the sum, any order
                 + sum |a| * 2 max|v| * (dx + dy)                        fp32 error of the pixel position

The last term: x * W - 0.5 in fp32 is off by up to dx = 4 * 2^-24 * (|x W| + W + 1) pixels (that allows
PyTorch's longer way round, (((2x - 1) + 1) * W - 1) / 2, too), and a bilinear sample moves by at most
2 max|v| per pixel of position (max over the level's map, the head and the channel). It matters only where
the result is near zero: everywhere else the bf16 rounding dominates by far.
"""
from __future__ import annotations

import numpy as np

from ..kit.host_arrays import BF16, finite_bf16_bits, first, host_array, require_bf16

U32 = 2.0 ** -24                                                # float32 unit roundoff
SEED_LEVELS = ((100, 116), (50, 58), (25, 29), (13, 15))        # seed 002 has 4 levels and 15,422 queries but
                                                                # no level shapes: these give S = Lq = 15,420
SIGMA_PIXELS = 2.0                                              # realistic offsets: normal, 2 pixels of each level

ARGS = ("value", "spatial_shapes", "level_start_index", "sampling_locations", "attention_weights")


def validate(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
    """Check the five inputs; return (value as uint16 bf16 bits [N, S, M, D], spatial_shapes int32 [L, 2],
    level_start_index int32 [L], sampling_locations float32 [N, Lq, M, L, P, 2], attention_weights float32
    [N, Lq, M, L, P]), all C-contiguous.

    TypeError for a non-array or a wrong dtype; ValueError for a wrong rank, sizes that disagree, an empty
    dimension, starts that are not the prefix sums of H * W, or a value that is not finite. Each message names
    the argument and the rule."""
    value = host_array("value", value)
    shapes = host_array("spatial_shapes", spatial_shapes)
    starts = host_array("level_start_index", level_start_index)
    loc = host_array("sampling_locations", sampling_locations)
    attn = host_array("attention_weights", attention_weights)
    require_bf16("value", value)
    for name, x in (("spatial_shapes", shapes), ("level_start_index", starts)):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got {x.dtype}; convert with `{name}.astype(np.int64)`")
    for name, x in (("sampling_locations", loc), ("attention_weights", attn)):
        if x.dtype != np.float32:
            raise TypeError(f"{name} must be float32, got {x.dtype}; convert with `{name}.astype(np.float32)`")

    if value.ndim != 4:
        raise ValueError(f"value must be 4-D [N, S, M, D], got {value.ndim}-D with shape {value.shape}")
    if shapes.ndim != 2 or shapes.shape[1] != 2:
        raise ValueError(f"spatial_shapes must be 2-D [L, 2], one (H, W) per level, got shape {shapes.shape}")
    if starts.ndim != 1:
        raise ValueError(f"level_start_index must be 1-D [L], got shape {starts.shape}")
    if loc.ndim != 6 or loc.shape[-1] != 2:
        raise ValueError(f"sampling_locations must be 6-D [N, Lq, M, L, P, 2] (the last axis (x, y)), got shape "
                         f"{loc.shape}")
    if attn.ndim != 5:
        raise ValueError(f"attention_weights must be 5-D [N, Lq, M, L, P], got shape {attn.shape}")

    N, S, M, D = value.shape
    L = shapes.shape[0]
    Lq, P = loc.shape[1], loc.shape[4]
    for name, n in (("N (images, value's axis 0)", N), ("M (heads, value's axis 2)", M),
                    ("D (channels per head, value's axis 3)", D), ("L (levels, spatial_shapes' rows)", L),
                    ("Lq (queries, sampling_locations' axis 1)", Lq), ("P (points, sampling_locations' axis 4)", P)):
        if n < 1:
            raise ValueError(f"{name} is {n}; every dimension must be at least 1")
    if starts.shape[0] != L:
        raise ValueError(f"level_start_index has {starts.shape[0]} entries but spatial_shapes has {L} levels: "
                         f"one start per level")
    want = (N, Lq, M, L, P, 2)
    if loc.shape != want:
        axis = next(i for i, (a, b) in enumerate(zip(loc.shape, want)) if a != b)
        what = ["N (images)", "Lq (queries)", "M (heads)", "L (levels)", "P (points)", "(x, y)"][axis]
        raise ValueError(f"sampling_locations has shape {loc.shape}, expected [N, Lq, M, L, P, 2] = {want}: its "
                         f"axis {axis}, {what}, must agree with value (N, M) and spatial_shapes (L)")
    if attn.shape != want[:5]:
        raise ValueError(f"attention_weights has shape {attn.shape}, expected [N, Lq, M, L, P] = {want[:5]}, "
                         f"the shape of sampling_locations without its last axis")

    sizes = shapes.astype(np.int64)
    if (sizes < 1).any():
        l, k = first(sizes < 1)
        raise ValueError(f"spatial_shapes[{l}] is {tuple(int(v) for v in sizes[l])}: every level's H and W must be "
                         f"at least 1 ({'H' if k == 0 else 'W'} is {int(sizes[l, k])})")
    areas = sizes[:, 0] * sizes[:, 1]
    if int(areas.sum()) != S:
        raise ValueError(f"value has S = {S} rows per image, but the levels of spatial_shapes cover "
                         f"sum(H * W) = {int(areas.sum())} pixels: S must be the total of every level's H * W")
    expected = np.concatenate([[0], np.cumsum(areas)[:-1]])
    wrong = starts.astype(np.int64) != expected
    if wrong.any():
        l = int(np.argmax(wrong))
        raise ValueError(f"level_start_index[{l}] is {int(starts[l])}, expected {int(expected[l])}: level_start_index "
                         f"must be the prefix sums of H * W (0, H0*W0, H0*W0 + H1*W1, ...), where each level starts "
                         f"in value")
    if S * M * D >= 2 ** 31:
        raise ValueError(f"value has S * M * D = {S * M * D:,} elements per image; the kernels index an image with "
                         f"32-bit integers, so it must be below 2^31")

    for name, x in (("sampling_locations", loc), ("attention_weights", attn)):
        bad = ~np.isfinite(x)
        if bad.any():
            where = first(bad)
            rule = ("locations must be finite (outside [0, 1] is allowed, NaN and infinity are not)"
                    if name == "sampling_locations" else "weights must be finite")
            raise ValueError(f"{name}[{', '.join(map(str, where))}] is {x[where]}; {rule} "
                             f"({int(bad.sum()):,} such value{'s' if bad.sum() > 1 else ''})")
    bits = finite_bf16_bits("value", value)
    return (bits, np.ascontiguousarray(shapes, np.int32), np.ascontiguousarray(starts, np.int32),
            np.ascontiguousarray(loc), np.ascontiguousarray(attn))


# ----------------------------------------------------------------------------------------------------------
# Random problems
# ----------------------------------------------------------------------------------------------------------
def to_bf16(x):
    """float -> bfloat16, rounded to nearest even (ml_dtypes does the rounding)."""
    return np.asarray(x, dtype=np.float32).astype(BF16)


def level_starts(levels):
    """Where each level starts in value: the prefix sums of H * W, as int64 [L]."""
    areas = [h * w for h, w in levels]
    return np.concatenate([[0], np.cumsum(areas)[:-1]]).astype(np.int64)


def border_positions(size):
    """Normalized coordinates that test a map of `size` pixels at its edges: 0 and 1 (the map's edges, pixel
    positions -0.5 and size - 0.5), the first and last pixel centres, pixel positions -1 and size (a corner
    exactly one pixel off the map: the sample is zero), between those, and well outside."""
    s = float(size)
    return np.array([0.0, 1.0, 0.5 / s, (s - 0.5) / s, -0.5 / s, (s + 0.5) / s, -0.25 / s, 1 + 0.25 / s,
                     1 / s, -0.3, 1.4], np.float64)


def random_problem(N, Lq, M, levels, P, D, *, locations="local", borders=0.0, rng=None):
    """Fresh inputs (value, spatial_shapes, level_start_index, sampling_locations, attention_weights).

    levels: [(H, W), ...]. value: uniform in [-1, 1), rounded to bf16. Weights: a softmax over the L * P samples
    of each (image, query, head), as the model's linear layer + softmax gives.
    locations:
      "local"    encoder self-attention: query q sits at pixel q (mod S) of the flattened pyramid; its reference
                 point is that pixel's centre, normalized, and each sample adds an offset drawn from a normal of
                 2 pixels of the level it samples. Neighbouring queries read neighbouring pixels: what a cache
                 rewards.
      "uniform"  anywhere on the map, uniformly: the same work with no locality.
    borders: the fraction of coordinates replaced by edge cases (see border_positions): exact edges, exact
    pixel centres, one pixel off the map, far outside.
    """
    rng = rng if rng is not None else np.random.default_rng()
    levels = [(int(h), int(w)) for h, w in levels]
    if locations not in ("local", "uniform"):
        raise ValueError(f"locations must be 'local' or 'uniform', got {locations!r}")
    L = len(levels)
    starts = level_starts(levels)
    S = int(sum(h * w for h, w in levels))
    value = np.empty((N, S, M, D), BF16)
    loc = np.empty((N, Lq, M, L, P, 2), np.float32)
    attn = np.empty((N, Lq, M, L * P), np.float32)
    if borders or N < 2 or value.size < THREADED_FROM:
        _draw_images(rng, value, loc, attn, levels, starts, locations, borders)
    else:     # the benchmark's size: each image from its own child of rng (the same on any machine), on threads
        import concurrent.futures
        import os
        children = rng.spawn(N)
        with concurrent.futures.ThreadPoolExecutor(min(N, os.cpu_count() or 1)) as pool:
            list(pool.map(lambda n: _draw_images(children[n], value[n:n + 1], loc[n:n + 1], attn[n:n + 1], levels,
                                                 starts, locations, 0.0), range(N)))
    return (value, np.array(levels, np.int64), starts, loc, attn.reshape(N, Lq, M, L, P))


THREADED_FROM = 1 << 24       # value elements from which random_problem draws its images on threads (NumPy's
                              # generators let go of the interpreter): the benchmark's 190 million took 14 s on one


def _draw_images(rng, value, loc, attn, levels, starts, locations, borders):
    """Fill one run of images in place: value [n, S, M, D] (bf16), loc [n, Lq, M, L, P, 2] and attn [n, Lq, M,
    L * P] (float32), drawn from rng in a fixed order (value, loc, borders, attn), so a seed gives the same inputs
    whether the images are drawn at once or a run at a time from the same generator."""
    N, Lq, M, L, P = loc.shape[:5]
    S = value.shape[1]
    # drawn and computed in float32, in place: the benchmark's size has some 190 million values and 380 million
    # coordinates, and float64 temporaries made drawing them take a minute
    v = rng.random(value.shape, dtype=np.float32)
    v *= 2
    v -= 1
    value[...] = to_bf16(v)
    del v
    H = np.array([h for h, _ in levels], np.float64)
    W = np.array([w for _, w in levels], np.float64)
    shape = (N, Lq, M, L, P)
    if locations == "local":
        pixel = np.arange(Lq) % S
        own = np.searchsorted(starts, pixel, side="right") - 1            # the level each query's pixel is in
        y, x = np.divmod(pixel - starts[own], W[own].astype(np.int64))
        ref_x, ref_y = (x + 0.5) / W[own], (y + 0.5) / H[own]              # [Lq]
        for axis, (ref, size) in enumerate(((ref_x, W), (ref_y, H))):
            c = loc[..., axis]
            c[...] = rng.standard_normal(shape, dtype=np.float32)          # an offset of SIGMA_PIXELS pixels
            c *= (SIGMA_PIXELS / size).astype(np.float32)[:, None]         # [.., L, P] / size_l
            c += ref.astype(np.float32)[None, :, None, None, None]
    else:
        loc[...] = rng.random(shape + (2,), dtype=np.float32)
    if borders:
        for axis, sizes in ((0, W), (1, H)):
            for l in range(L):
                pick = rng.random(shape[:3] + (P,)) < borders
                special = border_positions(sizes[l])
                loc[:, :, :, l, :, axis][pick] = rng.choice(special, size=int(pick.sum()))
    attn[...] = rng.standard_normal(attn.shape, dtype=np.float32)      # logits, then their softmax
    attn -= attn.max(axis=-1, keepdims=True)
    np.exp(attn, out=attn)
    attn /= attn.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------------------------------------
# The float64 reference
# ----------------------------------------------------------------------------------------------------------
def _float64(value):
    value = np.asarray(value)
    if value.dtype == np.uint16:
        value = value.view(BF16)
    return value.astype(np.float64)


def _arrays(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
    """The inputs as NumPy arrays: value as bf16 values (from its uint16 bits too), the shapes and starts int64."""
    value = np.asarray(value)
    return (value.view(BF16) if value.dtype == np.uint16 else value, np.asarray(spatial_shapes, np.int64),
            np.asarray(level_start_index, np.int64), np.asarray(sampling_locations), np.asarray(attention_weights))


def sample(value, spatial_shapes, level_start_index, sampling_locations, attention_weights, *, bound=False,
           align_corners=False, padding="zeros", swap_xy=False, weighted=True, use_starts=True, truncate=False,
           edge_le=""):
    """The sampling in float64, vectorised over queries, heads and points: out [N, Lq, M * D], and with
    bound=True also the tolerance's two arithmetic terms (see the module's docstring).

    The keyword arguments other than `bound` describe mistakes, for the checker's hints: align_corners=True
    arithmetic (x * (W - 1)), padding="border" (corners clamped onto the map instead of reading zero), x and
    y swapped, weights left out, every level read from row 0 of value, truncate=True ((int)x, rounding toward
    zero, where floor belongs: a position in (-1, 0) becomes pixel 0 and its fraction negative; samples that do
    not touch the map are still skipped), edge_le "x", "y" or "xy" (the right neighbour tested x0 + 1 <= W, the
    lower one y0 + 1 <= H: the corner one past the row, or past the level's last row, is read as the row-major
    offset gives, the next row's first pixel or the next level's)."""
    value, shapes, starts, loc, attn = _arrays(value, spatial_shapes, level_start_index, sampling_locations,
                                               attention_weights)
    N, S, M, D = value.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    out = np.zeros((N, Lq, M, D))
    summed = np.zeros((N, Lq, M, D)) if bound else None         # sum |a * w_corner * v|
    moved = np.zeros((N, Lq, M, D)) if bound else None          # sum |a| * 2 max|v| * (dx + dy)
    chunk = max(1, int(2 ** 21 // (M * P * D)))               # queries at a time: about 16 MB of float64 a gather
    heads = np.arange(M)[None, :, None]

    def image(n):                                              # one image: its own slices of the sums
        vn = value[n].astype(np.float32)                       # bf16 -> float32 is exact; float64 in the products
        for l in range(L):
            Hl, Wl = int(shapes[l, 0]), int(shapes[l, 1])
            start = int(starts[l]) if use_starts else 0
            vmax = np.abs(vn[start:start + Hl * Wl]).max(axis=0).astype(np.float64) if bound else None  # [M, D]
            for q0 in range(0, Lq, chunk):
                qs = slice(q0, min(q0 + chunk, Lq))
                x = loc[n, qs, :, l, :, 1 if swap_xy else 0].astype(np.float64)      # [q, M, P]
                y = loc[n, qs, :, l, :, 0 if swap_xy else 1].astype(np.float64)
                a = attn[n, qs, :, l, :].astype(np.float64) if weighted else np.ones(x.shape)
                if align_corners:
                    px, py = x * (Wl - 1), y * (Hl - 1)
                else:
                    px, py = x * Wl - 0.5, y * Hl - 0.5
                px, py = np.clip(px, -2.0, Wl + 1.0), np.clip(py, -2.0, Hl + 1.0)     # far outside reads zero anyway
                x0, y0 = (np.trunc(px), np.trunc(py)) if truncate else (np.floor(px), np.floor(py))
                fx, fy = px - x0, py - y0
                x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
                touch = (px > -1) & (py > -1) & (px < Wl) & (py < Hl)      # (implied by the corners, with floor)
                if truncate or edge_le:      # a sample on the touch test's edge: with these mistakes its outcome
                    eps = 1e-6 * (max(Wl, Hl) + 2)      # jumps, and float32 may land either side: unknown (NaN)
                    edgy = ((np.abs(px + 1) < eps) | (np.abs(px - Wl) < eps) | (np.abs(py + 1) < eps)
                            | (np.abs(py - Hl) < eps)).any(axis=-1)                 # [q, M]
                    if edgy.any():
                        out[n, qs] += np.where(edgy, np.nan, 0.0)[..., None]
                wx_end, hy_end = Wl + ("x" in edge_le), Hl + ("y" in edge_le)
                for dy, wy in ((0, 1.0 - fy), (1, fy)):
                    for dx, wx in ((0, 1.0 - fx), (1, fx)):
                        cx, cy = x0 + dx, y0 + dy
                        if padding == "border":
                            inside = np.ones(cx.shape, bool)
                        else:
                            inside = (cx >= 0) & (cx < wx_end) & (cy >= 0) & (cy < hy_end)
                        if truncate or edge_le:
                            inside &= touch
                        rows = start + np.clip(cy, 0, hy_end - 1) * Wl + np.clip(cx, 0, wx_end - 1)
                        w = np.where(inside, a * wx * wy, 0.0)                       # [q, M, P]
                        past = None
                        if edge_le:                  # past the end of value: no telling what a kernel reads (NaN)
                            past = ((rows > S - 1) & (w != 0)).any(axis=-1)          # [q, M]
                            rows = np.minimum(rows, S - 1)
                        v = vn[rows, heads]                                          # [q, M, P, D]
                        out[n, qs] += np.einsum("qmp,qmpd->qmd", w, v)
                        if past is not None and past.any():
                            out[n, qs] += np.where(past, np.nan, 0.0)[..., None]
                        if bound:
                            summed[n, qs] += np.einsum("qmp,qmpd->qmd", np.abs(w), np.abs(v))
                if bound:
                    slack = 4 * U32 * ((np.abs(x * Wl) + Wl + 1) + (np.abs(y * Hl) + Hl + 1))   # dx + dy, pixels
                    moved[n, qs] += np.einsum("qmp,md->qmd", np.abs(a) * slack, 2 * vmax)
    if N > 1 and N * Lq * M * L * P * D > 2e7:               # the benchmark's sizes: images on threads (NumPy's
        import concurrent.futures                             # gathers and sums run outside the interpreter lock)
        import os
        with concurrent.futures.ThreadPoolExecutor(min(N, os.cpu_count() or 1, 16)) as pool:
            list(pool.map(image, range(N)))
    else:
        for n in range(N):
            image(n)
    out = out.reshape(N, Lq, M * D)
    if not bound:
        return out
    return out, ((4 * L * P + 8) * U32 * summed + moved).reshape(N, Lq, M * D)


def reference(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
    """out [N, Lq, M * D] in float64: what every stage is compared with."""
    return sample(value, spatial_shapes, level_start_index, sampling_locations, attention_weights)


def reference_with_bound(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
    """(reference, bound): the bound is the tolerance less the output's own bf16 rounding. At the benchmark's sizes
    on a machine with a GPU and torch, the same float64 arithmetic runs there (seconds, not minutes of NumPy)."""
    args = (value, spatial_shapes, level_start_index, sampling_locations, attention_weights)
    if reference_on_gpu(value, sampling_locations):
        try:
            return sample_with_bound_torch(*args)
        except Exception as e:        # out of GPU memory, say: NumPy makes it whole, as on a machine without a GPU
            why = f"{type(e).__name__}: {e}"
        import warnings

        from ..peers import release
        release()                     # what the failed attempt held (its traceback is gone now) back to the card
        warnings.warn(f"the float64 reference could not be made on the GPU ({why}); making it with NumPy instead",
                      RuntimeWarning, stacklevel=2)
    return sample(*args, bound=True)


# The GPU reference is the same float64 arithmetic as sample()'s, only summed in another order: the two agree to
# about 1e-15 of the largest value, where the tolerance allows some 2^-9 (half a bf16 ulp). So they are
# interchangeable, and refmemo keys the disk cache by this file and NumPy's version alone (not by torch's, nor
# by which of the two made it): a reference made on a GPU is read back on a laptop, and the other way round.
LARGE_SAMPLING = 2e7            # N * Lq * M * L * P * D from which a reference is worth a GPU (sample() puts
                                # its images on threads from the same size)
GPU_BYTES = 2 << 30             # what the GPU reference holds at once, at most (a lesson shares its card)
GPU_MARGIN = 1 << 30            # left free on the card beyond that: the CUDA context, the allocator's rounding


def reference_on_gpu(value, sampling_locations) -> bool:
    """Whether reference_with_bound makes this problem's reference on the GPU: a large problem, a GPU that the
    workbook uses (not in Numba's simulator, which leaves any GPU alone), and torch with CUDA."""
    N, Lq, M, L, P = np.shape(sampling_locations)[:5]
    if N * Lq * M * L * P * np.shape(value)[-1] <= LARGE_SAMPLING:
        return False
    from .. import device
    if device.SIMULATOR or not device.has_gpu():        # asked first: importing torch takes seconds
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def sample_with_bound_torch(value, spatial_shapes, level_start_index, sampling_locations, attention_weights, *,
                            device="cuda", budget=None):
    """sample(..., bound=True) in torch, on `device`: the same float64 products, clipping, floor, corner tests and
    bound terms, returned the same way (NumPy float64 arrays [N, Lq, M * D]). A run of whole images at a time where
    an image fits in `budget` bytes (default: GPU_BYTES, or less where the card has less free), else a run of one
    image's queries; everything it held is given back. MemoryError where not even 1,024 queries fit."""
    import torch
    value, shapes, starts, loc, attn = _arrays(value, spatial_shapes, level_start_index, sampling_locations,
                                               attention_weights)
    N, S, M, D = value.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    dev = torch.device(device)
    if budget is None:
        budget = GPU_BYTES
        if dev.type == "cuda":
            free, _ = torch.cuda.mem_get_info(dev)
            budget = min(budget, free - GPU_MARGIN)
    per_image = S * M * D * 6                    # an image's value: its bf16 bits, widened to float32
    per_query = M * P * D * 24 + M * P * 8 * 32 + M * D * 8 * 4   # a corner's gather (float32, float64 and its
    # absolute value), some 30 [M, P] index and weight temporaries, the three sums and a copy on its way out
    queries = min(Lq, (budget - per_image) // per_query)
    if queries < min(Lq, 1024):
        raise MemoryError(f"the GPU reference needs {(per_image + min(Lq, 1024) * per_query) / 2 ** 20:,.0f} MiB "
                          f"and may take {max(budget, 0) / 2 ** 20:,.0f} MiB")
    images = max(1, min(N, budget // (per_image + Lq * per_query))) if queries == Lq else 1
    out = np.empty((N, Lq, M * D))
    bound = np.empty((N, Lq, M * D))
    heads = torch.arange(M, device=dev)[:, None]                       # [M, 1]: against rows [.., M, P]
    try:
        for n0 in range(0, N, images):
            ns = slice(n0, min(n0 + images, N))
            if value.dtype == BF16:             # widened on the card: bf16 -> float32 is exact, as in sample()
                vg = torch.from_numpy(np.ascontiguousarray(value[ns]).view(np.int16)).to(dev)
                vg = vg.view(torch.bfloat16).float()
            else:
                vg = torch.from_numpy(np.ascontiguousarray(value[ns], np.float32)).to(dev)
            g = vg.shape[0]
            first = (torch.arange(g, device=dev) * S)[:, None, None, None]   # each image's first row in vflat
            vflat = vg.reshape(g * S, M, D)
            vmax = [vg[:, int(starts[l]):int(starts[l]) + int(shapes[l, 0] * shapes[l, 1])].abs().amax(dim=1)
                    .double() for l in range(L)]                              # [g, M, D] a level
            for q0 in range(0, Lq, queries):
                qs = slice(q0, min(q0 + queries, Lq))
                o, b = _sample_chunk(torch, vflat, first, heads, vmax, shapes, starts,
                                     torch.from_numpy(np.ascontiguousarray(loc[ns, qs])).to(dev),
                                     torch.from_numpy(np.ascontiguousarray(attn[ns, qs])).to(dev))
                out[ns, qs] = o.reshape(g, -1, M * D).cpu().numpy()
                bound[ns, qs] = b.reshape(g, -1, M * D).cpu().numpy()
                del o, b
            del vg, vflat, vmax, first
    finally:
        del heads
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return out, bound


def _sample_chunk(torch, vflat, first, heads, vmax, shapes, starts, loc, attn):
    """One run of images and queries of sample_with_bound_torch, op for op as sample() does one image's: loc
    float32 [g, q, M, L, P, 2], attn float32 [g, q, M, L, P] on the device -> (out, bound), float64 [g, q, M, D]."""
    g, q, M, L, P = attn.shape
    D = vflat.shape[-1]
    out = torch.zeros((g, q, M, D), dtype=torch.float64, device=vflat.device)
    summed = torch.zeros_like(out)
    moved = torch.zeros_like(out)
    for l in range(L):
        Hl, Wl, start = int(shapes[l, 0]), int(shapes[l, 1]), int(starts[l])
        x = loc[:, :, :, l, :, 0].double()                                  # [g, q, M, P]
        y = loc[:, :, :, l, :, 1].double()
        a = attn[:, :, :, l, :].double()
        px, py = (x * Wl - 0.5).clamp(-2.0, Wl + 1.0), (y * Hl - 0.5).clamp(-2.0, Hl + 1.0)
        x0, y0 = torch.floor(px), torch.floor(py)
        fx, fy = px - x0, py - y0
        x0, y0 = x0.long(), y0.long()
        for dy, wy in ((0, 1.0 - fy), (1, fy)):
            for dx, wx in ((0, 1.0 - fx), (1, fx)):
                cx, cy = x0 + dx, y0 + dy
                inside = (cx >= 0) & (cx < Wl) & (cy >= 0) & (cy < Hl)
                rows = first + start + cy.clamp(0, Hl - 1) * Wl + cx.clamp(0, Wl - 1)
                w = torch.where(inside, a * wx * wy, 0.0)
                v = vflat[rows, heads].double()                             # [g, q, M, P, D]
                out += torch.einsum("nqmp,nqmpd->nqmd", w, v)
                summed += torch.einsum("nqmp,nqmpd->nqmd", w.abs(), v.abs())
                del v
        slack = 4 * U32 * ((torch.abs(x * Wl) + Wl + 1) + (torch.abs(y * Hl) + Hl + 1))   # dx + dy, pixels
        moved += torch.einsum("nqmp,nmd->nqmd", a.abs() * slack, 2 * vmax[l])
    return out, (4 * L * P + 8) * U32 * summed + moved


CORNERS = ("top-left (x0, y0)", "top-right (x0 + 1, y0)", "bottom-left (x0, y0 + 1)", "bottom-right (x0 + 1, y0 + 1)")
SIDES = ("left", "right", "top", "bottom")


def parts(value, spatial_shapes, level_start_index, sampling_locations, attention_weights):
    """The reference taken apart, for the checker's hints: (families, sides). families: {"level": [L, N, Lq, M * D],
    "point": [P, ...], "corner": [4, ...] (in CORNERS' order)}, each family summing to the reference, and "weights": [16, ...], corner c
    blended with corner k's bilinear weight at 4 c + k (the diagonal sums to the reference); and "knife": [N, Lq,
    M * D] bool, the outputs of items with a sample on the map at a whole pixel position (x or y within float32's
    reach of an integer), where floor may go either way: a mistake whose output jumps there cannot be told; sides: [4, N,
    Lq, M] bool (in SIDES' order), True where the item (n, q, m) has a sample on the map with a nonzero weight on a
    corner off the map on that side (x0 = -1, x0 + 1 = W, y0 = -1, y0 + 1 = H). Small problems only (the
    grader's): everything is held in float64."""
    value, shapes, starts, loc, attn = _arrays(value, spatial_shapes, level_start_index, sampling_locations,
                                               attention_weights)
    N, S, M, D = value.shape
    Lq, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    weighed = np.zeros((4, 4, N, Lq, M, D))          # corner c blended with corner w's bilinear weight
    level = np.zeros((L, N, Lq, M, D))
    point = np.zeros((P, N, Lq, M, D))
    corner = np.zeros((4, N, Lq, M, D))
    sides = np.zeros((4, N, Lq, M), bool)
    knife = np.zeros((N, Lq, M), bool)
    heads = np.arange(M)[None, :, None]
    for n in range(N):
        vn = value[n].astype(np.float32)
        for l in range(L):
            Hl, Wl, start = int(shapes[l, 0]), int(shapes[l, 1]), int(starts[l])
            px = np.clip(loc[n, :, :, l, :, 0].astype(np.float64) * Wl - 0.5, -2.0, Wl + 1.0)     # [Lq, M, P]
            py = np.clip(loc[n, :, :, l, :, 1].astype(np.float64) * Hl - 0.5, -2.0, Hl + 1.0)
            a = attn[n, :, :, l, :].astype(np.float64)
            x0, y0 = np.floor(px), np.floor(py)
            fx, fy = px - x0, py - y0
            x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
            on = (px > -1) & (py > -1) & (px < Wl) & (py < Hl)
            eps = 1e-5 * (max(Wl, Hl) + 2)
            knife[n] |= (on & ((np.abs(px - np.round(px)) < eps) | (np.abs(py - np.round(py)) < eps))).any(axis=-1)
            bilinear = ((1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx)
            for c, (dy, wy, dx, wx) in enumerate(((0, 1 - fy, 0, 1 - fx), (0, 1 - fy, 1, fx), (1, fy, 0, 1 - fx),
                                                  (1, fy, 1, fx))):
                cx, cy = x0 + dx, y0 + dy
                inside = (cx >= 0) & (cx < Wl) & (cy >= 0) & (cy < Hl)
                w = np.where(inside, a * wx * wy, 0.0)
                weighty = on & ~inside & (a * wx * wy != 0)
                for s, off in enumerate((cx < 0, cx >= Wl, cy < 0, cy >= Hl)):
                    sides[s, n] |= (weighty & off).any(axis=-1)
                rows = start + np.clip(cy, 0, Hl - 1) * Wl + np.clip(cx, 0, Wl - 1)
                v = vn[rows, heads]                                              # [Lq, M, P, D]
                contrib = w[..., None] * v
                for k in range(4):
                    weighed[c, k, n] += np.einsum("qmp,qmpd->qmd", np.where(inside, a * bilinear[k], 0.0), v)
                level[l, n] += contrib.sum(axis=2)
                point[:, n] += np.moveaxis(contrib, 2, 0)
                corner[c, n] += contrib.sum(axis=2)
    flat = lambda x: x.reshape(x.shape[0], N, Lq, M * D)
    return {"level": flat(level), "point": flat(point), "corner": flat(corner),
            "weights": weighed.reshape(16, N, Lq, M * D), "knife": np.repeat(knife, D, axis=-1).reshape(N, Lq, M * D)}, sides
