"""Pictures for the GEMM lessons, computed from the workbook's own layouts (nothing here is a typed coordinate).

A wgmma operand in shared memory (lesson 05):
    stage_image(bm, bn)                -> Stage   one k-tile's stage as TMA writes it (tma.load_box and
                                                  tma.smem_image over the rung's own tensor maps), each 2-byte
                                                  slot holding the id of the A or B element that lands there
    operand_addresses(desc, mn, mn_major) -> [mn, 16] the shared-memory byte each bf16 element (mn, k) of a
                                                  k16 operand is read from through its descriptor: the PTX ISA's
                                                  canonical layouts ("Shared Memory Matrix Layout"), the swizzle
                                                  applied by tma.swizzle_offsets, as TMA applies it
    derive_strides(stage)              -> dict    LBO, SBO and the k16 steps, measured on the TMA image as the
                                                  distances between core matrices (8 rows x 16 bytes)
    kernel_strides(source, **defines)  -> dict    the same values as the kernel passes them to smem_desc, read
                                                  from its source
    check_descriptors(stage, strides)  -> dict    for every k16 step, how many elements the descriptors read
                                                  wrongly (0 for the right values)
    draw_operands(stage, strides)                 A's 64 rows and B's boxes, each 16-byte chunk coloured by the
                                                  core matrix that step kk = 0 reads there

The grouped tile order (lesson 06; rung 04 walks its tiles the same way):
    grouped_tile(t, tiles_m, tiles_n, group_m) -> (tm, tn)   hopper.cuh's grouped_tile, in Python
    wave_panels(tiles_m, tiles_n, group_m, wave_size, wave)  -> (A row-panels, B column-panels) one wave touches
    draw_tile_order(ax, tiles_m, tiles_n, group_m, wave_size, waves)
"""
from __future__ import annotations

import ast
import dataclasses
import operator
import re

import numpy as np

from .. import tma
from . import wgmma
from .hopper import BK, map_args

CHUNK = 16                      # bytes: a core matrix is 8 rows of one 16-byte chunk (8 bf16)
ELEMENT = 2                     # bf16


# ------------------------------------------------------------------------------------------ wgmma operands
@dataclasses.dataclass
class Stage:
    """One k-tile's stage of shared memory, as the kernel's thread 0 has TMA fill it: A's box at byte 0, then
    B's boxes one after another. `ids[i]` is the element in bytes 2i, 2i+1 (0: nothing); `a_id[m, k]` and
    `b_id[k, n]` are the ids of A's [bm x BK] and B's [BK x bn] elements; `a_bytes` and `b_box_bytes` are the
    sizes of A's box and of one of B's, from the tensor maps."""
    bm: int
    bn: int
    ids: np.ndarray
    a_id: np.ndarray
    b_id: np.ndarray
    a_bytes: int
    b_box_bytes: int
    swizzle: str

    def address_of(self, ident: int) -> int:
        """The byte where TMA put the element with id `ident`."""
        return int(np.flatnonzero(self.ids == ident)[0]) * ELEMENT


def stage_image(bm: int = 128, bn: int = 128) -> Stage:
    """The stage of rung 05 (and of 06, 07: the same maps) for a tile of bm rows and bn columns, built by the
    TMA model (tma.load_box, tma.smem_image) from the tensor maps hopper.map_args describes."""
    maps = map_args(bm, bn, BK, bm=bm, bn=bn)
    a_map, b_map = maps["A"], maps["B"]
    swizzle = a_map["swizzle"]
    a_id = 1 + np.arange(bm * BK, dtype=np.uint16).reshape(a_map["shape"])
    b_id = (1 + bm * BK + np.arange(BK * bn, dtype=np.uint16)).reshape(b_map["shape"])
    a_bytes = int(np.prod(a_map["box"])) * ELEMENT
    b_box_bytes = int(np.prod(b_map["box"])) * ELEMENT
    boxes = [(0, a_id, a_map["box"], (0, 0))]
    boxes += [(a_bytes + j * b_box_bytes, b_id, b_map["box"], (0, j * b_map["box"][1]))
              for j in range(bn // b_map["box"][1])]
    image = np.zeros(a_bytes + len(boxes[1:]) * b_box_bytes, np.uint8)
    for at, ids, box, coords in boxes:
        values = tma.load_box(ids, box, coords)
        image[at:at + values.nbytes] = tma.smem_image(values, swizzle, base=at)
    return Stage(bm, bn, image.view(np.uint16), a_id, b_id, a_bytes, b_box_bytes, swizzle)


def operand_addresses(desc: int, mn: int, mn_major: bool) -> np.ndarray:
    """[mn, 16]: the byte each bf16 element (mn, k) of a k16 operand is read from through descriptor `desc`
    (A: mn = row m; B: mn = column n), relative to a 1024-aligned stage base. The canonical layouts of the PTX
    ISA, element (mn, k) inside 8 x 16-byte core matrices (W = the swizzle's width in bytes):
      K-major, swizzled:   (mn % 8) W + (mn / 8) SBO + (k / 8) 16 + (k % 8) 2                (LBO unused)
      MN-major, swizzled:  (mn / 8 % (W / 16)) 16 + (mn / 8 / (W / 16)) LBO + (k % 8) W + (k / 8) SBO
                           + (mn % 8) 2
      K-major, none:       (mn % 8) 16 + (mn / 8) SBO + (k / 8) LBO + (k % 8) 2
      MN-major, none:      (mn / 8) SBO + (k % 8) 16 + (k / 8) LBO + (mn % 8) 2
    then the start address added and the swizzle applied to the address, as TMA writes it."""
    f = wgmma.fields(desc)
    mn_i = np.arange(mn)[:, None]
    k = np.arange(16)[None, :]
    w = {"none": 0, "128B": 128, "64B": 64, "32B": 32}[f["swizzle"]]
    lbo, sbo = f["lbo"], f["sbo"]
    if not mn_major:
        off = (mn_i % 8) * (w or CHUNK) + (mn_i // 8) * sbo + (k // 8) * (CHUNK if w else lbo) + (k % 8) * ELEMENT
    elif w:
        per = w // CHUNK
        off = ((mn_i // 8) % per) * CHUNK + (mn_i // 8 // per) * lbo + (k % 8) * w + (k // 8) * sbo \
            + (mn_i % 8) * ELEMENT
    else:
        off = (mn_i // 8) * sbo + (k % 8) * CHUNK + (k // 8) * lbo + (mn_i % 8) * ELEMENT
    plain = f["address"] + off
    return tma.swizzle_offsets(int(plain.max()) + ELEMENT, f["swizzle"])[plain]


def derive_strides(stage: Stage) -> dict:
    """LBO, SBO and the k16 steps, read off the TMA image: the distance from the first element of the core
    matrix (0, 0) to that of the next core matrix along each direction. Rows 0 and 8 of a swizzled tile are
    not moved by the swizzle (row % 8 = 0), so these are plain distances.
    A (K-major): SBO = the next 8 rows of M; the second 8 k of a row are the next chunk (+16 bytes, fixed by
      the layout: LBO is not used); the next k16 step starts 16 k on.
    B (MN-major): SBO = the next 8 rows of K; inside one box the next 8 n are the next chunk (+16, fixed);
      LBO = where the next 64 columns of N start: the next box; the next k16 step starts 16 k rows on."""
    a, b, at = stage.a_id, stage.b_id, stage.address_of
    width = tma.SWIZZLES[stage.swizzle][1] // ELEMENT       # the elements of one swizzle span (64 bf16)
    return {
        "A": dict(sbo=at(a[8, 0]) - at(a[0, 0]), next_chunk=at(a[0, 8]) - at(a[0, 0]),
                  k16_step=at(a[0, 16]) - at(a[0, 0]), lbo=None),
        "B": dict(sbo=at(b[8, 0]) - at(b[0, 0]), next_chunk=at(b[0, 8]) - at(b[0, 0]),
                  lbo=(at(b[0, width]) - at(b[0, 0])) if b.shape[1] > width else None,
                  k16_step=at(b[16, 0]) - at(b[0, 0])),
    }


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def _int_expr(text: str, names: dict) -> int:
    """An integer C expression of + - * / % over literals and known names."""
    def ev(node):
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        raise ValueError(f"cannot evaluate {ast.unparse(node)!r} in {text!r}")
    return ev(ast.parse(text.strip(), mode="eval").body)


def kernel_constants(source: str, **defines) -> dict:
    """The kernel's `constexpr int NAME = expr;` values, evaluated in order with the -D constants."""
    names = dict(defines)
    for name, expr in re.findall(r"constexpr\s+int\s+(\w+)\s*=\s*([^;]+);", source):
        try:
            names[name] = _int_expr(expr, names)
        except (ValueError, SyntaxError):     # not plain arithmetic (a ?: in clusters.cu): left out
            pass
    return names


def kernel_strides(source: str, **defines) -> dict:
    """What the kernel passes to smem_desc for A and B: {"A": {k16_step, lbo, sbo}, "B": {...}}, read from
    `smem_desc(a + STEP * kk, LBO, SBO)` and `smem_desc(b + ...)` in its source, constants evaluated."""
    names = kernel_constants(source, **defines)
    found = {}
    for base, step, lbo, sbo in re.findall(r"smem_desc\(\s*([ab])\s*\+\s*([^,]+?)\s*\*\s*kk\s*,\s*([^,]+?)\s*,"
                                           r"\s*([^)]+?)\s*\)", source):
        values = dict(k16_step=_int_expr(step, names), lbo=_int_expr(lbo, names), sbo=_int_expr(sbo, names))
        if found.setdefault(base.upper(), values) != values:
            raise ValueError(f"the source builds {base}'s descriptor in more than one way: {found[base.upper()]} "
                             f"and {values}")
    if set(found) != {"A", "B"}:
        raise ValueError(f"expected smem_desc(a + ... * kk, ...) and smem_desc(b + ...), found {sorted(found)}")
    found["constants"] = names
    return found


def descriptors(stage: Stage, strides: dict, kk: int, wg: int = 0) -> tuple[int, int]:
    """(desc_a, desc_b) of k16 step `kk` for warpgroup `wg`, built with wgmma.descriptor from `strides`
    (derive_strides's or kernel_strides's; an LBO of None, unused, is given as 16)."""
    a, b = strides["A"], strides["B"]
    a_start = wg * 64 * (tma.SWIZZLES[stage.swizzle][1])
    return (wgmma.descriptor(a_start + a["k16_step"] * kk, lbo=a["lbo"] or CHUNK, sbo=a["sbo"], swizzle=stage.swizzle),
            wgmma.descriptor(stage.a_bytes + b["k16_step"] * kk, lbo=b["lbo"] or CHUNK, sbo=b["sbo"],
                             swizzle=stage.swizzle))


def check_descriptors(stage: Stage, strides: dict) -> dict:
    """Read every k16 step of every warpgroup through the descriptors `strides` give and count the elements
    that are not the ones the wgmma must see: {"A": wrong, "B": wrong, "read": elements read}."""
    wrong = {"A": 0, "B": 0, "read": 0}
    for wg in range(stage.bm // 64):
        for kk in range(BK // 16):
            da, db = descriptors(stage, strides, kk, wg)
            got_a = stage.ids[operand_addresses(da, 64, False) // ELEMENT]
            got_b = stage.ids[operand_addresses(db, stage.bn, True) // ELEMENT]
            wrong["A"] += int((got_a != stage.a_id[64 * wg:64 * wg + 64, 16 * kk:16 * kk + 16]).sum())
            wrong["B"] += int((got_b != stage.b_id[16 * kk:16 * kk + 16, :].T).sum())
            wrong["read"] += got_a.size + got_b.size
    return wrong


def chunk_map(addresses: np.ndarray, nbytes: int, mn_major: bool, first: int = 0):
    """For the 16-byte chunks of bytes [first, first + nbytes): the core matrix read there (-1: none) and the
    (mn, k) of the chunk's first element, from an operand's addresses [mn, 16]."""
    lines = nbytes // 128
    core = np.full((lines, 128 // CHUNK), -1)
    label = np.empty((lines, 128 // CHUNK), object)
    for (mn, k), at in np.ndenumerate(addresses):
        at -= first
        if not 0 <= at < nbytes:
            continue
        line, pos = divmod(at // CHUNK, 128 // CHUNK)
        core[line, pos] = (mn // 8) * 2 + k // 8
        if (mn if mn_major else k) % 8 == 0:            # the chunk's first element
            label[line, pos] = (mn, k)
    return core, label


def draw_operands(stage: Stage, strides: dict, kk: int = 0):
    """Warpgroup 0's A rows and each of B's boxes as shared memory: 128-byte lines (rows), 16-byte chunks
    (columns). Step kk's core matrices in colour (A: one colour per 8 rows x 8 k; B: per 8 k x 8 n); the
    chunks later k16 steps read, grey with their step. LBO, SBO and the k16 step are marked."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    row = tma.SWIZZLES[stage.swizzle][1]
    da, db = descriptors(stage, strides, kk)
    steps = BK // 16
    panels = [("A", 0, 64 * row, da, 64, False)]
    panels += [(f"B box {j}", stage.a_bytes + j * stage.b_box_bytes, stage.b_box_bytes, db, stage.bn, True)
               for j in range(stage.bn // (row // ELEMENT))]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels) + 0.6, 9.5))
    palette = ListedColormap(plt.get_cmap("tab20").colors + plt.get_cmap("tab20b").colors)
    for ax, (name, first, nbytes, desc, mn, mn_major) in zip(np.atleast_1d(axes), panels):
        core, label = chunk_map(operand_addresses(desc, mn, mn_major), nbytes, mn_major, first)
        other = np.zeros_like(core)
        for later in range(steps):                      # which step reads each chunk
            d = descriptors(stage, strides, later)[1 if mn_major else 0]
            c, _ = chunk_map(operand_addresses(d, mn, mn_major), nbytes, mn_major, first)
            other[c >= 0] = later
        rgb = np.ones(core.shape + (3,))
        rgb[:] = (0.92, 0.92, 0.92)
        mask = core >= 0
        rgb[mask] = np.asarray(palette(core[mask] % palette.N))[:, :3]
        ax.imshow(rgb, aspect="auto", interpolation="nearest")
        for (line, pos), what in np.ndenumerate(label):
            if what is not None:
                text = f"k{what[1]}" if not mn_major else f"n{what[0]}"
                ax.text(pos, line, text, ha="center", va="center", fontsize=5)
            elif not mask[line, pos]:
                ax.text(pos, line, str(other[line, pos]), ha="center", va="center", fontsize=5, color="0.55")
        for y in range(8, core.shape[0], 8):
            ax.axhline(y - 0.5, color="k", lw=0.5)
        ax.set_xticks(range(core.shape[1]), [str(CHUNK * p) for p in range(core.shape[1])], fontsize=6)
        ax.set_yticks(range(0, core.shape[0], 8), [f"{first + 128 * y}" for y in range(0, core.shape[0], 8)],
                      fontsize=6)
        ax.set_xlabel("byte in the 128-byte line", fontsize=8)
        s = strides["B" if mn_major else "A"]
        if mn_major:
            where = "box 0" if first == stage.a_bytes else f"box {(first - stage.a_bytes) // s['lbo']}: box 0 + " \
                f"{(first - stage.a_bytes) // s['lbo']} x LBO"
            kind = f"{where}\nMN-major: a line is one k, 64 n"
        else:
            kind = f"warpgroup 0's rows\nK-major: a line is one m, 64 k (LBO unused)"
        ax.set_title(f"{name[0]} bytes {first}..{first + nbytes - 1}, {kind}", fontsize=8)
        ax.annotate("", xy=(-0.9, s["sbo"] // 128 - 0.5), xytext=(-0.9, -0.5), annotation_clip=False,
                    arrowprops=dict(arrowstyle="<->", color="k", lw=1))
        ax.text(-1.1, s["sbo"] / 256 - 0.5, f"SBO\n{s['sbo']} B", ha="right", va="center", fontsize=7)
        step_line = s["k16_step"] // 128
        if mn_major:
            ax.annotate(f"kk = 1:\n+{s['k16_step']} B", xy=(7.5, step_line - 0.5), xytext=(8.6, step_line - 0.5),
                        fontsize=7, va="center", annotation_clip=False, arrowprops=dict(arrowstyle="->"))
        else:
            ax.set_xlabel(f"byte in the 128-byte line (kk = 1: +{s['k16_step']} B, the chunks marked 1)",
                          fontsize=8)
    axes[0].set_ylabel("shared-memory byte (line starts; one line = 128 B)", fontsize=8)
    fig.suptitle(f"k16 step kk = {kk} of a {stage.bm} x {BK} A tile and a {BK} x {stage.bn} B tile, "
                 f"{stage.swizzle} swizzle, as the descriptors read them\ncolour = the core matrix (8 rows x 16 B) "
                 f"read there, label = its first element; grey = a chunk a later step kk reads", fontsize=9)
    plt.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------ grouped tile order
def grouped_tile(t: int, tiles_m: int, tiles_n: int, group_m: int) -> tuple[int, int]:
    """(tm, tn) of the t-th tile in the grouped order: hopper.cuh's grouped_tile (and rung 04's inline copy).
    Tile t walks down a group of group_m tile rows before moving one tile column right; group_m = 1 is plain
    row-major order."""
    per_group = group_m * tiles_n
    first = t // per_group * group_m
    rows = min(tiles_m - first, group_m)
    r = t % per_group
    return first + r % rows, r // rows


def tile_order(tiles_m: int, tiles_n: int, group_m: int) -> np.ndarray:
    """[tiles_m, tiles_n]: the position t of each output tile in the order."""
    order = np.empty((tiles_m, tiles_n), int)
    for t in range(tiles_m * tiles_n):
        order[grouped_tile(t, tiles_m, tiles_n, group_m)] = t
    return order


def wave_panels(tiles_m: int, tiles_n: int, group_m: int, wave_size: int, wave: int = 0) -> tuple[int, int]:
    """(distinct tile rows, distinct tile columns) among tiles wave * wave_size ... + wave_size - 1 of the order:
    the row-panels of A and the column-panels of B that wave of blocks reads."""
    tiles = [grouped_tile(t, tiles_m, tiles_n, group_m)
             for t in range(wave * wave_size, min((wave + 1) * wave_size, tiles_m * tiles_n))]
    return len({tm for tm, _ in tiles}), len({tn for _, tn in tiles})


def wave_traffic(M: int, N: int, K: int, bm: int, bn: int, group_m: int, wave_size: int) -> dict:
    """The panels a persistent grid of `wave_size` blocks reads, wave by wave (wave w: tiles w * wave_size
    onwards): wave 0's distinct A row-panels and B column-panels, and the bytes of distinct panels a wave
    reads (bf16: a panel is bm or bn rows of K), averaged over the run's waves. If each panel's k-slices come
    from DRAM once a wave and from L2 for the other blocks of that wave, this is the DRAM traffic a wave."""
    tiles_m, tiles_n = -(-M // bm), -(-N // bn)
    n_waves = -(-tiles_m * tiles_n // wave_size)
    counts = [wave_panels(tiles_m, tiles_n, group_m, wave_size, w) for w in range(n_waves)]
    per_wave = [(a * bm + b * bn) * K * ELEMENT for a, b in counts]
    return dict(a_panels=counts[0][0], b_panels=counts[0][1], waves=n_waves,
                bytes_per_wave=sum(per_wave) / n_waves)


def drawn_rows(tiles_m: int, tiles_n: int, group_ms, wave_size: int, waves: int = 2) -> int:
    """How many tile rows the first `waves` waves reach in any of the orders `group_ms` (where to crop)."""
    return 1 + max(grouped_tile(t, tiles_m, tiles_n, g)[0]
                   for g in group_ms for t in range(min(waves * wave_size, tiles_m * tiles_n)))


def draw_tile_order(ax, tiles_m: int, tiles_n: int, group_m: int, wave_size: int, waves: int = 2, numbered: int = 6,
                    rows: int | None = None):
    """The output tiles coloured by the wave that computes them (the first `waves`; later ones white), the
    first `numbered` tiles of each wave numbered by their place in the order; tile rows 0 .. rows - 1 shown."""
    import matplotlib
    order = tile_order(tiles_m, tiles_n, group_m)
    wave = order // wave_size
    colours = np.ones((tiles_m, tiles_n, 3))
    for w in range(waves):
        colours[wave == w] = np.asarray(matplotlib.colormaps["Set2"](w))[:3]
    rows = tiles_m if rows is None else min(rows, tiles_m)
    ax.imshow(colours[:rows], aspect="equal", interpolation="nearest")
    for (tm, tn), t in np.ndenumerate(order[:rows]):
        if t < waves * wave_size and t % wave_size < numbered:
            ax.text(tn, tm, str(t), ha="center", va="center", fontsize=4.5)
    ax.set_xticks(np.arange(tiles_n + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="0.85", lw=0.3)
    ax.tick_params(which="both", length=0, labelsize=6)
    ax.set_xlabel("tile column of C (a column-panel of B)", fontsize=8)
    ax.set_ylabel(f"tile row of C (a row-panel of A): rows 0..{rows - 1} of {tiles_m}", fontsize=8)
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=colours[wave == w][0], label=f"wave {w}") for w in range(waves)
                       if (wave == w).any()], fontsize=7, loc="lower right")
    a, b = wave_panels(tiles_m, tiles_n, group_m, wave_size)
    ax.set_title(f"group_m = {group_m}{' (row-major)' if group_m == 1 else ''}: wave 0 reads "
                 f"{a} A panels, {b} B panels", fontsize=8)
    return ax
