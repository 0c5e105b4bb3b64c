"""msda 05 with four shuffles a sample in place of five: a sample's corner row (packed with its steps, as now),
the right column's share h, and its top and bottom rows' weights vt = a sx wt, vb = a sx wb; every lane then forms
the four corner weights, (1 - h) vt, h vt, (1 - h) vb, h vb. A column off the map needs no weight of its own: its
address is clamped onto the other column's pixel, which the two corners then both read, so only their sum counts;
that sum (the one column's bilinear weight, sx) goes into vt and vb, and h is 0. Rows off the map keep weight 0 in
vt or vb. Each shuffle costs a cycle of the unit the L1's loads use (lesson 05's probe); the price is one FADD and
four FMULs a sample in every lane. Right in the emulator on test_msda_s05's cases; 3,432 SASS instructions a lane
against the rung's 3,328 (128 shuffles against 160).

Measured on an H200 at ace1181 (results/readings/H200_msda_05_lane_groups_edit_msda05_four_shuffles.json): level,
rung / edited 1.004x on `local` and 0.996x on `uniform` (10 interleaved rounds; back to back 1.001x and 1.000x).
Most likely the cycle the shuffle frees is paid back in the extra instructions (not profiled). Not adopted.
"""
TRACK, STAGE = "msda", "05_lane_groups"       # the rung whose kernel this edits
BASE = "b4a18e2"                              # the kernel it fits: the rung before it took msda05_sample_pairs
ADOPTED = False                                # pinned, not adopted: it may still fit the rung's kernel

from cudabook.edits import swap as _swap  # noqa: E402


def edit(text: str) -> str:
    text = _swap(text, """\
            const float my_w00 = top && left ? a * (1.f - fy) * (1.f - fx) : 0.f;
            const float my_w01 = top && right ? a * (1.f - fy) * fx : 0.f;
            const float my_w10 = bottom && left ? a * fy * (1.f - fx) : 0.f;
            const float my_w11 = bottom && right ? a * fy * fx : 0.f;
""", """\
            const float sx = (left ? 1.f - fx : 0.f) + (right ? fx : 0.f);   // 1 with both columns on the map
            const float my_h = left && right ? fx : 0.f;
            const float my_vt = top ? a * sx * (1.f - fy) : 0.f, my_vb = bottom ? a * sx * fy : 0.f;
""")
    return _swap(text, """\
                    const float w00 = __shfl_sync(FULL, my_w00, j, G), w01 = __shfl_sync(FULL, my_w01, j, G);
                    const float w10 = __shfl_sync(FULL, my_w10, j, G), w11 = __shfl_sync(FULL, my_w11, j, G);
""", """\
                    const float h = __shfl_sync(FULL, my_h, j, G);
                    const float vt = __shfl_sync(FULL, my_vt, j, G), vb = __shfl_sync(FULL, my_vb, j, G);
                    const float w00 = (1.f - h) * vt, w01 = h * vt, w10 = (1.f - h) * vb, w11 = h * vb;
""")
