"""GEMM 07 with Stream-K sharing out the last one to two waves instead of the last, partial one alone.

Rung 07's Stream-K (stream_k=True) runs every whole wave as usual and cuts only the leftover units (fewer than
there are clusters) into one equal k-tile range a cluster. Osama et al.'s "two-tile" hybrid shares out more: all
but one of the whole waves run as usual (W = units / clusters - 1), and the R units left, between one and two
waves' worth, are cut into the clusters' ranges, so each range is at least a unit long. At 4096^3 on 66
clusters that is 124 units shared at once instead of 58. Before Stream-K was a setting of the rung, this
schedule was measured as an edit (H200, commit 1df682f; results/readings/H200_gemm_07_clusters_stream_k_ncu.json
keeps its Nsight Compute reading): its clusters work on twice as many units at a time as a wave holds, and it
read a third more from DRAM than the rung. Probed here against the rung at the same setting (PARAMS), the last
wave's sharing against this one's.
"""
TRACK, STAGE = "gemm", "07_clusters"          # the rung whose kernel this edits
PARAMS = {"stream_k": True}                   # both with Stream-K: which units it shares is the difference


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    return _swap(text, "    W = tiles / clusters;\n",
                 "    W = max(tiles / clusters - 1, 0);          // Stream-K edit: all but one whole wave, then 1-2 shared\n")
