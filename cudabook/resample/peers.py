"""The resampling track's peers, what a user would write instead: np.interp per channel in PyTorch, eager and
torch.compile'd.

Measured in the same process and on the same data as the ladder, never quoted from elsewhere (whether torch can
run at all: cudabook.peers.available).
"""
from __future__ import annotations

import contextlib


def resample_torch(times, feats, targets):
    """np.interp per (batch, channel) in float32, bf16 out. times [B,S] f32, feats [B,S,D] bf16, targets [B,T]."""
    import torch
    S, D = feats.shape[1], feats.shape[2]
    hi = torch.searchsorted(times, targets, right=True).clamp_(1, S - 1)
    lo = hi - 1
    t0, t1 = times.gather(1, lo), times.gather(1, hi)
    w = ((targets - t0) / (t1 - t0)).clamp_(0, 1).unsqueeze(-1)
    a = feats.gather(1, lo.unsqueeze(-1).expand(-1, -1, D)).float()
    c = feats.gather(1, hi.unsqueeze(-1).expand(-1, -1, D)).float()
    return (a + w * (c - a)).to(torch.bfloat16)


def inductor_pdl(torch):
    """Inductor's option to launch its Triton kernels with programmatic dependent launch (off by default), as a
    context in which a function is compiled; a RuntimeError saying so where this torch has no such option."""
    triton_config = torch._inductor.config.triton
    if not hasattr(triton_config, "enable_pdl"):
        raise RuntimeError(f"torch {torch.__version__} has no inductor PDL option (torch._inductor.config.triton"
                           f".enable_pdl)")
    return torch._inductor.config.patch({"triton.enable_pdl": True})


def wanted(name, names) -> bool:
    """Whether peer `name` is timed when `names` are asked for (None: all): a peer with inductor's PDL option
    ("..._pdl") is timed wherever the same peer without it is."""
    return names is None or name in names or name.removesuffix("_pdl") in names


def torch_inputs(src_times, src_feats, tgt_times):
    """torch's copies of the inputs on the GPU: times, feats (bf16), targets."""
    import numpy as np
    import torch
    dev = torch.device("cuda")
    return (torch.from_numpy(src_times).to(dev),
            torch.from_numpy(src_feats.view(np.uint16).astype(np.int16)).to(dev).view(torch.bfloat16),
            torch.from_numpy(tgt_times).to(dev))


def compiled(mode=None):
    """resample_torch, torch.compile'd afresh in this mode with static shapes (as one compiled for one size: after a
    second size, automatic dynamic shapes would compile a slower kernel for every size, seen in results/sizes/).
    The strongest mode a user would pick: max-autotune without CUDA graphs (the timing already queues the calls
    back to back behind a sleeping kernel, so graphs would only add their own launch); it tries Triton
    configurations and takes minutes to compile."""
    import torch
    torch._dynamo.reset()                    # the same function again: compile it afresh in this mode
    return torch.compile(resample_torch, dynamic=False, mode=mode)


# name: (mode, inductor's PDL option)
COMPILED = {"torch_compile": (None, False), "torch_compile_max_autotune": ("max-autotune-no-cudagraphs", False),
            "torch_compile_max_autotune_pdl": ("max-autotune-no-cudagraphs", True)}


def ready(name, inputs):
    """A callable that runs peer `name` once on `inputs` (torch_inputs), compiled and warmed up, and its first
    output."""
    import torch
    if name == "torch_eager":
        return (lambda: resample_torch(*inputs)), resample_torch(*inputs)
    mode, pdl = COMPILED[name]
    fn = compiled(mode)
    with inductor_pdl(torch) if pdl else contextlib.nullcontext():
        got = fn(*inputs)                    # compiles and warms up
    return (lambda: fn(*inputs)), got


def measure(src_times, src_feats, tgt_times, ref, scale, *, repeats=25, names=None, progress=None):
    """{"torch_eager": {...}, "torch_compile": {...}, "torch_compile_max_autotune": {...},
    "torch_compile_max_autotune_pdl": {...}}: median_us and correctness on these inputs. The last is max-autotune
    compiled with inductor's PDL option on (an error row saying so where this torch has none), timed wherever
    max-autotune is (names: those to time). progress(line), where given, hears each peer as it starts."""
    import numpy as np
    import torch

    from .. import bench
    from .checking import compare
    from .inputs import BF16
    inputs = torch_inputs(src_times, src_feats, tgt_times)
    out = {}
    for name in ("torch_eager", *COMPILED):
        if not wanted(name, names):
            continue
        if progress is not None:
            progress(f"{name}: " + ("timing …" if name == "torch_eager" else "compiling, then timing …"))
        try:
            call, got = ready(name, inputs)
            ms = bench.time_ms(call, repeats=repeats, batch=10)
            bits = got.view(torch.int16).cpu().numpy().view(np.uint16)
            verdict = compare(bits.view(BF16), ref, scale)
            out[name] = {"median_us": round(ms * 1e3, 2), "correct": verdict.ok}
        except Exception as e:  # a peer that fails is reported, not fatal
            out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    return out
