"""Helpers that tests of several tracks share (this folder is on sys.path: conftest.py sits in it)."""
import pytest


def sass_or_skip():
    """Skip the calling test unless this machine can print SASS (cuobjdump, and nvdisasm behind it)."""
    from cudabook import nvrtc
    try:
        nvrtc.cuobjdump_path()
    except nvrtc.ToolMissing as e:
        pytest.skip(str(e))
    if nvrtc._tool_path("nvdisasm") is None:
        pytest.skip("cuobjdump needs nvdisasm to print SASS: pip install nvidia-cuda-nvdisasm")
