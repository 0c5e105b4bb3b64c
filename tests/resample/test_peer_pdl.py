"""The torch.compile peer with inductor's PDL option: asked for where the option exists, refused with the reason
where it does not (no torch is needed: a stand-in carries the config)."""
import types

import pytest

from cudabook.resample import benchmark, peers


def _torch(with_option):
    patched = []
    triton = types.SimpleNamespace(**({"enable_pdl": False} if with_option else {}))
    config = types.SimpleNamespace(triton=triton, patch=lambda changes: patched.append(changes) or "ctx")
    return types.SimpleNamespace(__version__="9.9", _inductor=types.SimpleNamespace(config=config)), patched


def test_the_option_is_patched_on_where_torch_has_it():
    torch, patched = _torch(True)
    assert peers.inductor_pdl(torch) == "ctx" and patched == [{"triton.enable_pdl": True}]


def test_a_torch_without_the_option_says_so():
    torch, _ = _torch(False)
    with pytest.raises(RuntimeError, match="torch 9.9 has no inductor PDL option"):
        peers.inductor_pdl(torch)


def test_the_benchmark_times_it_and_a_lesson_does_not():
    assert "torch_compile_max_autotune_pdl" in benchmark.PEERS
    assert "torch_compile_max_autotune_pdl" not in benchmark.LESSON_PEERS
