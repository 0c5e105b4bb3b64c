"""GEMM 07 with both of its edits that paid: the deferred epilogue with the consumers' branch first
(gemm07_deferred_consumers_first.py) and Stream-K on the last wave (gemm07_stream_k_last_wave.py), together.

Where a piece of a unit starts at k-tile k0, the last tile's box b is stored after the piece's k-tile k0 + b (the
deferred edit counts from k-tile 0), and what is left of them after a piece shorter than four k-tiles is stored
after its loop. A piece that parks its sums does not store, so the boxes of the tile before it may be stored
twice (the same bytes to the same place): right, and rare.
"""
from cudabook import edits as _edits

_deferred = _edits.load("gemm07_deferred_consumers_first")
_stream_k = _edits.load("gemm07_stream_k_last_wave")
_deferred_base = _edits.load("gemm07_deferred_epilogue")
TRACK, STAGE = _deferred.TRACK, _deferred.STAGE
MARK = "// deferred epilogue + Stream-K edit (tools/kernel_edits/gemm07_deferred_stream_k.py)"
_base_sk = _edits.load("gemm07_stream_k")


def edit(text: str) -> str:
    text = _deferred_base.edit(text)
    text = _base_sk.edit(text, schedule=_stream_k.SCHEDULE, fixup=_stream_k.FIXUP, mark=MARK)
    swap = _base_sk._swap
    text = swap(text, "if (pm0 >= 0 && kt < B_BOXES) store_box_at(kt, packed,",
                "if (pm0 >= 0 && kt - w.k0 < B_BOXES) store_box_at(kt - w.k0, packed,")
    text = swap(text, "for (int box = k_tiles; box < B_BOXES; ++box) store_box_at(box, packed,",
                "for (int box = w.k1 - w.k0; box < B_BOXES; ++box) store_box_at(box, packed,")
    return _deferred.consumers_first(text)


def host(stage_module):
    _base_sk.host(stage_module, mark=MARK)
