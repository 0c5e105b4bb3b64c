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


def test_it_is_timed_with_max_autotune_so_in_the_benchmark_and_not_in_a_lesson():
    pdl = "torch_compile_max_autotune_pdl"
    assert peers.wanted(pdl, benchmark.PEERS) and peers.wanted(pdl, None)
    assert not peers.wanted(pdl, benchmark.LESSON_PEERS)
    assert peers.wanted("torch_eager", benchmark.LESSON_PEERS) and not peers.wanted("torch_compile", ["torch_eager"])
