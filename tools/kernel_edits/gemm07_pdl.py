"""Rung 07 launched with programmatic dependent launch: each block runs `griddepcontrol.wait` right after its
barriers exist (before any global memory is read or written) and `griddepcontrol.launch_dependents` right after
that, and the host launches the edited kernel with the programmatic stream serialization attribute. Back to back,
the next call's blocks may then be launched while this call's last blocks still run, onto the SMs those free,
and set up their barriers and cluster there; they wait for the whole previous grid (and its memory) before
touching A, B, C or the Stream-K workspace. What it can save is the launch gap and the prologue between two
calls, a few microseconds a call. At the rung's settings (stream_k "auto").
"""
TRACK, STAGE = "gemm", "07_clusters"

ANCHOR = "  if (CLUSTER > 1) cluster_sync(); else __syncthreads();   // peers' barriers exist before anyone multicasts\n"
PDL = ('  asm volatile("griddepcontrol.wait;" ::: "memory");        // the previous grid done, its writes seen\n'
       '  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");   // the next may be set up meanwhile\n')


def edit(text: str) -> str:
    assert text.count(ANCHOR) == 1, f"the kernel no longer has exactly one {ANCHOR!r}"
    return text.replace(ANCHOR, ANCHOR + PDL)


def host(module):
    """The edited text (it runs griddepcontrol.wait) is launched with pdl=True; the rung's own text as before."""
    from cudabook import nvrtc
    build, launch, state = module._build, nvrtc.Kernel.launch, {"pdl": False}

    def launch_pdl(self, *args, pdl=False, **kwargs):
        return launch(self, *args, pdl=pdl or state["pdl"], **kwargs)

    def build_pdl(p, kernel, params):
        run = build(p, kernel, params)
        if kernel is None or "griddepcontrol.wait" not in kernel:
            return run

        def run_pdl():
            state["pdl"] = True
            try:
                return run()
            finally:
                state["pdl"] = False
        return run_pdl
    nvrtc.Kernel.launch = launch_pdl
    module._build = build_pdl
