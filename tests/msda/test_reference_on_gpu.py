"""Issue "workshop pace": at the benchmark's sizes the deformable-attention track's float64 reference is made on the
GPU where there is one (torch, the same float64 arithmetic as NumPy's sample()), seconds instead of minutes of
NumPy. The two agree to rounding, borders included; the GPU path holds a bounded amount of memory and gives it
back; a machine without a GPU (or in the simulator, or without torch) makes it with NumPy as before; a GPU that
fails hands the whole reference to NumPy; and importing the track never imports torch."""
import os
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

from cudabook import device
from cudabook.msda import inputs

LARGE = dict(N=2, Lq=2500, M=8, L=4, P=4, D=32)        # 20.5 million: just over inputs.LARGE_SAMPLING
SMALL = dict(N=2, Lq=2400, M=8, L=4, P=4, D=32)        # 19.7 million: just under it


def _shapes(N, Lq, M, L, P, D):
    """(value, sampling_locations) stand-ins of these sizes that hold no memory: the dispatch reads only shapes."""
    return (np.broadcast_to(np.zeros((), inputs.BF16), (N, 100, M, D)),
            np.broadcast_to(np.float32(0.5), (N, Lq, M, L, P, 2)))


def _relative(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


def _torch_with_cuda(monkeypatch, available=True):
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(
        is_available=lambda: available)))


def test_the_gpu_makes_only_large_references_and_only_where_the_workbook_uses_a_gpu(monkeypatch):
    monkeypatch.setattr(device, "SIMULATOR", False)
    monkeypatch.setattr(device, "has_gpu", lambda: True)
    _torch_with_cuda(monkeypatch)
    assert inputs.reference_on_gpu(*_shapes(**LARGE))
    assert not inputs.reference_on_gpu(*_shapes(**SMALL))             # NumPy is quick enough there
    _torch_with_cuda(monkeypatch, available=False)
    assert not inputs.reference_on_gpu(*_shapes(**LARGE))             # torch without CUDA
    monkeypatch.setitem(sys.modules, "torch", None)                    # no torch: `import torch` fails
    assert not inputs.reference_on_gpu(*_shapes(**LARGE))
    _torch_with_cuda(monkeypatch)
    monkeypatch.setattr(device, "SIMULATOR", True)                     # the simulator leaves any GPU alone
    assert not inputs.reference_on_gpu(*_shapes(**LARGE))
    monkeypatch.setattr(device, "SIMULATOR", False)
    monkeypatch.setattr(device, "has_gpu", lambda: False)
    assert not inputs.reference_on_gpu(*_shapes(**LARGE))


def test_without_a_gpu_the_reference_is_numpys(monkeypatch):
    monkeypatch.setattr(device, "has_gpu", lambda: False)
    monkeypatch.setattr(inputs, "sample_with_bound_torch", lambda *a, **k: pytest.fail("the GPU path was taken"))
    monkeypatch.setattr(inputs, "sample", lambda *args, **kw: ("numpy", len(args), kw))
    value, loc = _shapes(**LARGE)
    assert inputs.reference_with_bound(value, None, None, loc, None) == ("numpy", 5, {"bound": True})


def test_a_gpu_that_fails_hands_the_whole_reference_to_numpy(monkeypatch, rng):
    args = inputs.random_problem(1, 30, 2, ((5, 4), (2, 3)), 3, 8, borders=0.3, rng=rng)

    def fails(*a, **k):
        raise MemoryError("CUDA out of memory")
    monkeypatch.setattr(inputs, "reference_on_gpu", lambda *a: True)
    monkeypatch.setattr(inputs, "sample_with_bound_torch", fails)
    with pytest.warns(RuntimeWarning, match="could not be made on the GPU .MemoryError: CUDA out of memory.; making "
                                            "it with NumPy"):
        ref, bound = inputs.reference_with_bound(*args)
    want, want_bound = inputs.sample(*args, bound=True)
    assert np.array_equal(ref, want) and np.array_equal(bound, want_bound)


def test_importing_the_track_does_not_import_torch(tmp_path):
    """A stand-in torch shadows any real one: the track, its checker and a small reference leave it unimported."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    code = ("import sys, numpy as np\n"
            "import cudabook.msda, cudabook.msda.checking\n"
            "from cudabook.msda import inputs\n"
            "inputs.reference_with_bound(*inputs.random_problem(1, 10, 2, ((3, 4),), 2, 8))\n"
            "print('torch' in sys.modules)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_the_torch_sampling_is_numpys_in_runs_of_images_and_of_queries(rng):
    """Where torch is installed (on the GPU if there is one, else on the CPU): budgets that make it take whole
    images a few at a time, and one image's queries a run at a time, give NumPy's (out, bound)."""
    torch = pytest.importorskip("torch")
    where = "cuda" if torch.cuda.is_available() and device.has_gpu() and not device.SIMULATOR else "cpu"
    levels = ((20, 23), (10, 12), (5, 6), (1, 1))
    for size, budget in ((dict(N=5, Lq=300), 10 << 20), (dict(N=2, Lq=3000), 20 << 20)):
        args = inputs.random_problem(**size, M=4, levels=levels, P=5, D=16, borders=0.3, rng=rng)
        want, want_bound = inputs.sample(*args, bound=True)
        got, bound = inputs.sample_with_bound_torch(*args, device=where, budget=budget)
        assert got.dtype == bound.dtype == np.float64 and got.shape == bound.shape == want.shape
        assert _relative(got, want) <= 1e-12 and _relative(bound, want_bound) <= 1e-12
    with pytest.raises(MemoryError, match="MiB"):                      # not even 1,024 queries fit
        inputs.sample_with_bound_torch(*args, device=where, budget=1 << 20)


@pytest.mark.gpu
def test_the_gpu_reference_is_numpys_at_the_full_level_shapes(rng):
    """Four images at the seed's level shapes, borders among the samples: reference_with_bound takes the GPU, its
    (out, bound) is NumPy's to 1e-12 of the largest, it held at most inputs.GPU_BYTES, and it gave them back."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    args = inputs.random_problem(4, 15420, 8, inputs.SEED_LEVELS, 8, 32, borders=0.02, rng=rng)
    loc = args[3]
    for l, (H, W) in enumerate(inputs.SEED_LEVELS):                   # the map's edges are among the samples
        assert np.isin(loc[..., l, :, 0], inputs.border_positions(W).astype(np.float32)).mean() > 0.01
        assert np.isin(loc[..., l, :, 1], inputs.border_positions(H).astype(np.float32)).mean() > 0.01
    assert inputs.reference_on_gpu(args[0], loc)
    x = torch.ones((1, 2, 1, 2), dtype=torch.float64, device="cuda")  # cuBLAS's workspace, kept by torch for the
    torch.einsum("nqmp,nqmpd->nqmd", x, x[..., None])                 # process from its first product on (32 MiB
    del x                                                              # on Hopper), is not the reference's to free
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                 # a fall back to NumPy fails the test
        got, bound = inputs.reference_with_bound(*args)
    peak = torch.cuda.max_memory_allocated() - held
    assert torch.cuda.memory_allocated() == held, "the GPU reference kept memory after it returned"
    assert peak <= inputs.GPU_BYTES, f"the GPU reference held {peak / 2 ** 30:.2f} GiB"
    want, want_bound = inputs.sample(*args, bound=True)
    assert got.dtype == bound.dtype == np.float64 and got.shape == bound.shape == want.shape == (4, 15420, 256)
    assert _relative(got, want) <= 1e-12 and _relative(bound, want_bound) <= 1e-12
