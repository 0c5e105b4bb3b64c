import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the tests' shared modules (helpers, ptxchild, corpus/) import from every folder below this one
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
import cudabook  # noqa: E402  (decides simulator or GPU before numba is imported anywhere)
from cudabook import device  # noqa: E402


def _notebook_kernels_over_unix_sockets():
    """nbval starts each notebook's kernel on TCP ports that it picks as free and the kernel binds a moment later;
    two xdist workers starting kernels at once can pick the same port, and the loser waits out the startup timeout
    (seen in CI: "Kernel didn't respond in 60 seconds" for every cell of one lab). Unix sockets in a folder of this
    process's own cannot collide."""
    try:
        import nbval.kernel
    except ImportError:
        return
    import atexit
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="cudabook-kernels-")
    atexit.register(shutil.rmtree, folder, True)

    class UnixSocketKernelManager(nbval.kernel.KernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=os.path.join(folder, "kernel"), **kwargs)
    nbval.kernel.KernelManager = UnixSocketKernelManager


_notebook_kernels_over_unix_sockets()


# The simulator switch as cudabook left it. Numba reads NUMBA_ENABLE_CUDASIM again whenever it reloads its config
# (at compiles), so a module that set it while being imported made the kernels decorated afterwards in that
# process the simulator's, on a GPU machine (tools/stale_records.py did, once): collection and every test must
# leave it as it was.
_SIMULATOR_SWITCH = os.environ.get("NUMBA_ENABLE_CUDASIM")


def _switch_moved(when: str) -> str | None:
    now = os.environ.get("NUMBA_ENABLE_CUDASIM")
    return None if now == _SIMULATOR_SWITCH else (
        f"NUMBA_ENABLE_CUDASIM is {now!r} {when}, {_SIMULATOR_SWITCH!r} before: something set it in this process "
        "(use monkeypatch.setenv, or set it in a child process's environment)")


def pytest_collection_modifyitems(config, items):
    moved = _switch_moved("after the test modules were imported")
    if moved:
        raise pytest.UsageError(moved)
    gpu = device.gpu()
    for item in items:
        if "gpu" in item.keywords and gpu is None:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {device.why_no_gpu()}"))
        elif "hopper" in item.keywords:
            why = device.requirement_unmet((9, 0), "this test")
            if why:
                item.add_marker(pytest.mark.skip(reason=why))


_default_rng = None


@pytest.fixture(autouse=True)
def _reproducible_randomness(request, monkeypatch):
    """Every test draws fresh random inputs, from a seed that a failure prints: `np.random.default_rng()`
    without a seed (what the workbook calls) draws from a per-test SeedSequence. Rerun a failure with
    CUDABOOK_SEED=<seed> to get the same inputs."""
    import os
    import secrets

    import numpy as np
    global _default_rng
    _default_rng = _default_rng or np.random.default_rng
    seed = int(os.environ.get("CUDABOOK_SEED") or secrets.randbits(32))
    sequence = np.random.SeedSequence(seed)

    def default_rng(s=None):
        return _default_rng(sequence.spawn(1)[0] if s is None else s)
    monkeypatch.setattr(np.random, "default_rng", default_rng)
    request.node.user_properties.append(("random seed", seed))


@pytest.fixture(autouse=True)
def _simulator_switch_left_alone():
    yield
    moved = _switch_moved("after this test")
    assert not moved, moved


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for key, value in item.user_properties:
            if key == "random seed":
                report.sections.append(("random seed", f"this test drew its inputs from seed {value}: rerun it with "
                                                       f"CUDABOOK_SEED={value}"))


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng()


@pytest.fixture(autouse=True)
def _no_emulator_left_behind():
    """A test that leaves the CPU emulator installed (device.EMULATED) would make every later test in its worker
    compile for the emulator instead of NVRTC: fail the test that leaks it, and clean up for the next."""
    yield
    leaked = device.EMULATED
    device.EMULATED = None
    assert leaked is None, "this test left the CPU emulator installed (cudabook.device.EMULATED)"
