"""msda 05 with its items taken head by head: queries fastest, so that a warp serves 8 queries of one head.

Rung 05 at BASE numbered its items (n, q, m), heads fastest: a warp served the 8 heads of one query, a block of
512 threads 16 queries, and the blocks an SM holds at once read from all 8 heads' maps of the image, 7.9 MB at the
benchmark's size, far more than its L1 holds. Here the items are numbered (n, m, q): a warp serves 8 queries of
one head, a block 128 queries of it, and the whole grid's resident blocks read from two or three heads' maps at a
time. One head's map is 987 KB at the benchmark's size; its levels 1 to 3 are 244 KB and levels 2 and 3 59 KB,
so on `uniform` locations the corners of the small levels should come from L1 where the rung reads them from L2.
On `local` locations a block's queries are 128 neighbours of one head in place of 16 of every head. Only the
items' order changes: each item still reads and writes its own (n, q, m) row. Measured on the H200 (profiled with
`python -m cudabook.profile --edit` at 959e40e, printed then, not kept): on `uniform`, L1 held 46.8 % of the
sectors the global loads asked for, against the rung's 22.7 %.

Adopted: rung 05 has had heads_outer_wide's three edits since the commit after BASE (its reading on the H200:
1.057x on `local` and 1.199x on `uniform` in 10 interleaved rounds, 1.075x and 1.152x back to back).
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "072c6ff"                              # adopted since: the last commit before (rung_text reads it)

from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    return _swap(text, """\
    const long long item = t / G;                      // (n, q, m) flattened, heads fastest
    const int g = (int)(t % G);
    if (item >= (long long)N * Lq * M || g >= VECS) return;    // (lanes past the row: when G > VECS)
    const int m = (int)(item % M);
    const long long nq = item / M;
    const int n = (int)(nq / Lq);
""", """\
    const long long order = t / G;                     // (n, m, q) flattened, queries fastest
    const int g = (int)(t % G);
    if (order >= (long long)N * Lq * M || g >= VECS) return;   // (lanes past the row: when G > VECS)
    const int q = (int)(order % Lq);
    const long long nm = order / Lq;
    const int m = (int)(nm % M);
    const int n = (int)(nm / M);
    const long long item = ((long long)n * Lq + q) * M + m;   // the row it reads and writes: (n, q, m)
""")
