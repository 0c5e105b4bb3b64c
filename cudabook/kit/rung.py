"""The life cycle of a C++ rung, written once for every track.

A C++ rung is a .cu file in its track's kernels/ folder plus a Python module that sets its constants and
launches it. Every rung goes through the same steps, and `CudaRung` does each of them one way:

    RUNG = CudaRung("05_wgmma_tma", KERNELS / "wgmma_tma.cu", min_cc=(9, 0), sm90a=True)
    RUNG.source()                    the .cu text, re-read when the file changes (the lesson shows it)
    RUNG.text(kernel)                the text a launch compiles: the rung's own, or a learner's (kernel=...)
    RUNG.unavailable()               None, or why this machine cannot run it ("needs compute capability 9.0 ...")
    RUNG.require()                   StageUnavailable with that reason
    RUNG.params(defaults, given)     defaults updated by the given parameters; TypeError naming an unknown one
    RUNG.compile(defines, ...)       the cubin (no GPU needed), with the rung's folder and the kit's include/
    RUNG.prepare(text, defines, ...) compiled, loaded, allowed its shared memory and checked to fit: cached
                                     per source, constants and GPU (or emulator session)

Every compile sees two include folders: the track's kernels/ and `INCLUDE` (cudabook/kit/include: the
mbarrier/TMA/wgmma wrappers in hopper.cuh, the mma.sync ones in mma_sync.cuh). Tensor maps a launch encodes
are cached per description and address (`tensor_map`).
"""
from __future__ import annotations

import dataclasses
import pathlib
import weakref

from .. import device, nvrtc
from ..errors import StageUnavailable
from .params import merge_params

INCLUDE = nvrtc.INCLUDE

# Compiler messages that betray a mistake in a learner's wgmma code (rungs name them COMPILE_LOG_MISTAKES; the lab
# grader, cudabook.labs, reads them). Without wgmma.wait_group before the accumulators are read, ptxas inserts one
# itself (C7517) and the result may still come out right, so no test run would catch it; where ptxas puts its
# wait is not where a ring needs it (before the stage is released for refilling).
WGMMA_LOG_MISTAKES = [
    (r"C7517|wait(_group)? is injected",                  # NVRTC 13.0 says "warpgroup.wait", later "wgmma.wait_group"
     "ptxas inserted a wgmma.wait_group because your code uses the accumulators (or moves on) before waiting "
     "for the wgmmas: after wgmma_commit(), wait with wgmma_wait<0>() before the stage may be refilled"),
    (r"C75\d\d.*serializ",
     "ptxas serialized the wgmmas (each waits for the one before): the accumulators are touched between "
     "wgmma_fence() and wgmma_commit(), or the wgmmas are not all in one fence/commit group"),
]


def hopper_unavailable(name: str) -> str | None:
    """None on a compute capability 9.0 GPU; else why not. sm_90a ("a": architecture-specific) code, which
    wgmma, setmaxnreg and multicast need, runs on 9.0 only: not on Blackwell (10.x, 12.x) either."""
    g = device.gpu()
    if g is not None and g.compute_capability == (9, 0):
        return None
    have = (f"this machine has none ({device.why_no_gpu()}). It still compiles: see the lesson's SASS" if g is None
            else f"this GPU ({g.name}) is {g.cc}, and sm_90a code does not run on later architectures (Blackwell "
                 f"replaced wgmma by tcgen05)")
    return (f"{name} is compiled for sm_90a (wgmma.mma_async, setmaxnreg, TMA multicast), which needs an NVIDIA GPU "
            f"of compute capability 9.0 exactly (H100, H200, GH200); {have}.")


@dataclasses.dataclass
class Prepared:
    """A rung's compiled constants on this GPU: its kernels by name (the first is the main one), the dynamic
    shared memory they were allowed, the cubin, and (where a block size was given) how many blocks of the main
    kernel fit on an SM."""
    kernels: dict
    smem: int
    cubin: bytes
    blocks_per_sm: int | None = None
    _core: object = None

    def __getitem__(self, name):
        return self.kernels[name]

    @property
    def main(self):
        return next(iter(self.kernels.values()))

    def slots(self, blocks_per_sm: int = 0) -> int:
        """Blocks the whole GPU holds at once: those that fit on an SM (at most `blocks_per_sm`, 0: no limit),
        times the SMs. A persistent grid launches this many."""
        fits = min(self.blocks_per_sm, blocks_per_sm) if blocks_per_sm else self.blocks_per_sm
        return fits * device.gpu().sms

    def core_kernel(self):
        """The main kernel loaded through cuda.core (for its launch API), once."""
        if self._core is None:
            self._core = nvrtc.core_kernel(self.cubin, self.main.name, self.smem)
        return self._core


class CudaRung:
    """One C++ rung's source, capability check, parameters, compile, load and launch cache (see the module)."""

    def __init__(self, name: str, source: pathlib.Path, *, min_cc=(8, 0), sm90a: bool = False):
        self.name, self.path, self.min_cc, self.sm90a = name, pathlib.Path(source), tuple(min_cc), sm90a
        self.include_path = (self.path.parent,)       # nvrtc.compile adds INCLUDE to every compile
        self._prepared: dict = {}

    def source(self) -> str:
        """The kernel's CUDA C++ source (lessons show it; labs are cut from its `// >>> lab` regions).
        Re-read when the file changes, so an edited kernel is picked up."""
        return nvrtc.source_text(self.path)

    def text(self, kernel=None) -> str:
        """The source a launch compiles: the rung's file (None), a learner's text, or a pathlib.Path to one."""
        return nvrtc.kernel_text(kernel, self.path, self.name)

    def unavailable(self) -> str | None:
        if self.sm90a:
            return hopper_unavailable(self.name)
        return device.requirement_unmet(self.min_cc, self.name)

    def require(self):
        why = self.unavailable()
        if why:
            raise StageUnavailable(why)

    def params(self, defaults: dict, given: dict) -> dict:
        """defaults updated by `given`; a TypeError naming any parameter the rung does not take."""
        return merge_params(self.name, defaults, given)

    def compile(self, defines: dict, *, arch: str | None = "sm_90a", source_text: str | None = None) -> bytes:
        """The cubin for these -D constants (needs no GPU: arch sm_90a by default; None means this GPU's)."""
        return nvrtc.compile(self.source() if source_text is None else source_text, arch=arch,
                             name=self.path.name, include_path=list(self.include_path), defines=defines)

    def prepare(self, text: str, defines: dict, kernels, *, smem: int = 0, threads: int | None = None,
                advice: str = "fewer stages or smaller tiles") -> Prepared:
        """Compile `text` with `defines`, load `kernels` (names; the first is the main one), allow it `smem`
        bytes of dynamic shared memory, and with `threads` count the blocks that fit on an SM (a ValueError
        naming `advice` when that is none, or when smem is more than this GPU allows). Cached per source,
        constants, kernels and GPU (or emulator session)."""
        kernels = (kernels,) if isinstance(kernels, str) else tuple(kernels)
        key = (hash(text), len(text), tuple(sorted(defines.items())), kernels, smem, threads,   # (a str keeps its hash:
               id(device.gpu()))                                   # a repeated launch pays no hashing of the text)
        hit = self._prepared.get(key)
        if hit is not None:
            return hit
        optin = device.gpu().smem_per_block_optin
        if smem > optin:
            raise ValueError(f"{self.name}: this configuration needs {smem:,} bytes of shared memory per block "
                             f"and this GPU allows {optin:,}: {advice}")
        cubin = nvrtc.compile(text, name=self.path.name, include_path=list(self.include_path), defines=defines)
        loaded = {name: nvrtc.load(cubin, name) for name in kernels}
        main = loaded[kernels[0]]
        if smem:
            main.set_max_dynamic_shared(smem)
        fits = None
        if threads is not None:
            fits = main.blocks_per_sm(threads, smem)
            if fits < 1:
                raise ValueError(f"{self.name}: a block of {threads} threads with {smem:,} bytes of shared memory "
                                 f"does not fit on an SM: {advice}")
        self._prepared[key] = Prepared(loaded, smem, cubin, fits)
        return self._prepared[key]


_maps: dict = {}


def tensor_map(args: dict, address: int):
    """cuTensorMapEncodeTiled through cudabook.tma.encode_tiled (which runs check_tiled first), for a map
    described as check_tiled's keyword arguments (dtype, shape, strides, box, ...) at `address`; cached per
    description and address."""
    from .. import tma
    key = (address, tuple(sorted((k, v) for k, v in args.items())))
    if key not in _maps:
        if len(_maps) > 256:
            _maps.clear()
        a = dict(args)
        _maps[key] = tma.encode_tiled(a.pop("dtype"), a.pop("shape"), a.pop("strides"), a.pop("box"), address, **a)
    return _maps[key]


def cached_launch(cache: dict, key, arrays, build):
    """Run the launch closure for `key`, building it once with build(): a repeated launch costs a dict lookup
    and cuLaunchKernel. The closure is reused only while `arrays` are the very same objects."""
    hit = cache.get(key)
    if hit is None or any(ref() is not a for ref, a in zip(hit[0], arrays)):
        hit = (tuple(weakref.ref(a) for a in arrays), build())
        if len(cache) >= 16:
            cache.pop(next(iter(cache)))
        cache[key] = hit
    hit[1]()
