"""gemm07_deferred_epilogue.py with the consumers' branch of the role split first in the source.

The deferred epilogue spills: its bf16 pairs need 64 registers beside the 128 accumulators, and ptxas holds the
consumer code to about 184 registers (the highest it names), well under the 232 setmaxnreg grants. Attention 06
recorded the same on NVRTC 13.0 and 13.5 and a way out: with the consumers' branch first in the source (`if (wg
!= 0) { consumers } else { producer }`) ptxas gave the consumer code what it needed. This edit tries that here.
"""
from cudabook import edits as _edits

_base = _edits.load("gemm07_deferred_epilogue")
TRACK, STAGE = _base.TRACK, _base.STAGE

PRODUCER = "  if (wg == 0) {                               // ---------------------------------------- producer\n"
CONSUMERS = "  } else {                                     // ---------------------------------------- consumers\n"
END = "  if (CLUSTER > 1) cluster_sync();             // no block leaves"


def consumers_first(text: str) -> str:
    """The role split with the consumers' branch first."""
    for part in (PRODUCER, CONSUMERS, END):
        assert text.count(part) == 1, f"the kernel no longer has exactly one {part!r}"
    a, b, c = text.index(PRODUCER), text.index(CONSUMERS), text.index(END)
    producer = text[a + len(PRODUCER):b]
    close = text.rindex("  }\n", b, c)                 # the consumers' closing brace
    consumers = text[b + len(CONSUMERS):close]
    return (text[:a] + "  if (wg != 0) {                              // ---------------------------------------- consumers\n"
            + consumers + "  } else {                                     // ---------------------------------------- producer\n"
            + producer + text[close:])


def edit(text: str) -> str:
    return consumers_first(_base.edit(text))
