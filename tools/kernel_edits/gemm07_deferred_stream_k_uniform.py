"""GEMM 07 with the deferred epilogue (consumers' branch first, gemm07_deferred_consumers_first.py) and Stream-K
on the last wave (the rung's stream_k), without the wgmma serialisation ptxas reported for that pair.

That build logged C7518 ("wgmma.mma_async instructions are serialized due to program dependence on
compiler-inserted WG.DP in divergent path", NVRTC 13.5): every HGMMA of the k-loop is followed by a
WARPGROUP.DEPBAR.LE gsb0, 0x0 in its SASS. The line the message names is in the PTX, and it is the `trap;` of the
watchdog in the consumers' mbar_wait (the wait for a full stage, inside the k-loop, with a k-tile of wgmmas in
flight), not the Stream-K fix-up: removing the park, the fix-up's adds or the `continue` leaves C7518, removing
only that trap removes it. Before a thread leaves the kernel its wgmmas must be done, so ptxas puts a wgmma wait
on the trap's path; that path is per thread (each thread's try_wait and timer), so the wait is on a divergent
path, and with the consumers' branch first and the Stream-K schedule ptxas serialises the wgmmas to honour it.
Without Stream-K the same trap gives C7517 (a wait injected, nothing serialised) in the consumers-first builds.

Here the consumers wait for a full stage a warp at a time: the warp leaves the spin when try_wait succeeded on
all its lanes (__all_sync; a completed phase stays complete until this consumer releases the stage, so polling
it again is safe), and the watchdog's decision is the warp's (__any_sync), so the trap is on a warp-uniform
path, where the warp first waits for its wgmmas itself (wgmma_wait<0>, executed by the whole warp as .aligned
requires) and then traps. The arithmetic, the schedule, the producer and every other wait are the rung's and
the deferred edit's. Compiled on a CPU (NVRTC 13.5, cuobjdump): empty ptxas log, the k-loop's four HGMMAs
back to back and one WARPGROUP.DEPBAR.LE gsb0, 0x1 a k-tile, no STL/LDL, the consumer code up to R223.

No host change: the rung's host passes the workspace and flags whenever Stream-K is on. Probed at the rung's
own setting (stream_k="auto": on at 8192^3, off at 4096^3).
"""
from cudabook import edits as _edits

_deferred = _edits.load("gemm07_deferred_consumers_first")
TRACK, STAGE = _deferred.TRACK, _deferred.STAGE
MARK = "// deferred epilogue + Stream-K, warp-uniform watchdog edit (tools/kernel_edits/gemm07_deferred_stream_k_uniform.py)"

WAIT = MARK + r"""
// mbar_wait for a consumer warp with wgmmas in flight: the warp spins until the phase is complete on all its
// lanes and decides the watchdog as one (votes), so the timeout's trap is not on a divergent path (a wgmma wait
// ptxas must put before a trap on a per-thread path serialises every wgmma of the k-loop: C7518).
__device__ __forceinline__ void mbar_wait_warp(uint32_t bar, uint32_t parity) {
  if (__all_sync(0xffffffffu, mbar_try_wait(bar, parity))) return;
  const uint64_t t0 = globaltimer_ns();
  for (uint32_t n = 1;; ++n) {
    if (__all_sync(0xffffffffu, mbar_try_wait(bar, parity))) return;
    if ((n & 0x3FFF) == 0 && __any_sync(0xffffffffu, globaltimer_ns() - t0 > WATCHDOG_NS)) {
      wgmma_wait<0>();                         // the warp's wgmmas are done before it leaves
      asm volatile("trap;");
    }
  }
}

"""
ANCHOR = "// A consumer warpgroup is done with stage"


from cudabook.edits import swap as _swap  # noqa: E402  (one match, or the edit no longer fits)


def edit(text: str) -> str:
    text = _deferred.edit(text)
    text = _swap(text, ANCHOR, WAIT + ANCHOR)
    return _swap(text, "        mbar_wait(full + 8 * s, phase);", "        mbar_wait_warp(full + 8 * s, phase);")
