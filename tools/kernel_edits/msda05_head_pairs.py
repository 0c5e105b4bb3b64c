"""msda 05 with its items taken two heads at a time: a warp serves 4 neighbouring queries of two neighbouring heads.

Head by head (the rung), a warp's 8 items are 8 queries of one head, and every corner piece it loads sits at the
same place of its 128-byte line (head m's 64 bytes start at byte 64 (m mod 2) of a pixel's line): the probe's
one-line-a-cycle case of the L1 (tools/probe_l1_gather.py: 64-byte pieces at the same place arrive one a cycle,
spread over both halves two a cycle). Here the items are numbered (n, m / 2, q, m mod 2): a warp's 8 items are 4
queries of heads 2k and 2k + 1, half its pieces first halves of their lines and half second halves, the spread
case, while the blocks an SM holds still read two heads' maps. Whether it pays says whether the L1's data pipe
holds rung 05 (its profile's "L1 pipe %"). With an odd number of heads the items are taken head by head, as the
rung takes them. Only the items' order changes: each item still reads and writes its own (n, q, m) row. Right on
the emulator cases of test_msda_s05 (D = 8 to 40) with M = 2, 3 and 4, both ways.

Measured on an H200 at b879a10 (results/readings/H200_msda_05_lane_groups_edit_msda05_head_pairs.json and
..._profile_edit_msda05_head_pairs.json): rung / edited 1.029x on `local` (10 interleaved rounds; 1.025x back to
back, 2 s each), 0.959x on `uniform` (1.018x back to back). Nsight Compute answers the question above: the rung
keeps the L1's data pipe 92 % busy on `local` and 91 % on `uniform`; the edit brings that to 67 % and 69 %, but on
`local` the issue slots then hold it (76 % busy, the ALU at 67 %, not_selected and math_pipe_throttle 61 % of warp
cycles), and on `uniform` the L1 hit rate falls (49.3 % to 44.4 %; most likely because an SM's blocks now read two
heads' maps each) and it is slower in the interleaved rounds, though not back to back. Not adopted: rung 05 sits
against two limits at once, the L1's data pipe and the issue slots, and this edit, relieving the first alone,
gained a few percent on `local` and lost on `uniform` in the interleaved rounds. With msda05_shuffled_positions it
pays: msda05_head_pairs_shuffled, 1.081x and 1.037x.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "8f88c1b"                              # the kernel it fits: the rung before it took head_pairs_packed32
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    return _swap(text, """\
    const int q = (int)(order % Lq);
    const long long nm = order / Lq;
    const int m = (int)(nm % M);
    const int n = (int)(nm / M);
""", """\
    int q, m, n;
    if (M % 2 == 0) {                                  // (n, m / 2, q, m mod 2): two heads, queries between them
        q = (int)((order >> 1) % Lq);
        const long long np = (order >> 1) / Lq;
        m = (int)(np % (M / 2)) * 2 + (int)(order & 1);
        n = (int)(np / (M / 2));
    } else {                                           // an odd number of heads: head by head
        q = (int)(order % Lq);
        const long long nm = order / Lq;
        m = (int)(nm % M);
        n = (int)(nm / M);
    }
""")
