"""The copy ceiling (cudabook.bench.copy_ceilings): its bookkeeping kernels compile anywhere; on a GPU every copy
is checked on the GPU before it is timed, and a copy that misses bytes raises, naming itself and the count."""
import pathlib

import pytest

from cudabook import bench, nvrtc

STREAM_COPY = pathlib.Path(bench.__file__).parent / "kit" / "include" / "stream_copy.cu"


def test_the_ceilings_kernels_compile_for_hopper():
    cubin = nvrtc.compile(STREAM_COPY.read_text(), name="stream_copy.cu", arch="sm_90a")
    sass = nvrtc.sass(cubin)
    for kernel in ("stream_copy", "fill_words", "count_unequal"):
        assert kernel in sass, f"{kernel} missing from stream_copy.cu's cubin"


@pytest.mark.gpu
def test_every_copy_is_checked_and_measured():
    ceilings = bench.copy_ceilings(1 << 24, repeats=3)
    assert {"memcpy", "kernel16x4_4", "kernel16x4_8"} <= set(ceilings)
    assert sum(k.startswith("stream") for k in ceilings) == len(bench.STREAM_SHAPES)
    assert all(v > 0 for v in ceilings.values()), ceilings


@pytest.mark.gpu
def test_a_copy_that_misses_a_vector_is_caught():
    import numpy as np
    from cuda.bindings import driver as drv
    from numba import cuda
    words = 1 << 16
    src = cuda.device_array((1, 1, words), dtype=np.uint32)
    dst = cuda.device_array_like(src)
    ledger = bench._CopyLedger(src, dst, words, cuda.get_current_device().MULTIPROCESSOR_COUNT)
    a, b = src.device_ctypes_pointer.value, dst.device_ctypes_pointer.value
    ledger.check(lambda: drv.cuMemcpyDtoDAsync(b, a, words * 4, 0), "a whole copy")
    with pytest.raises(RuntimeError, match=r"short copy copied wrongly: 1 of 16,384 16-byte vectors differ"):
        ledger.check(lambda: drv.cuMemcpyDtoDAsync(b, a, words * 4 - 16, 0), "short copy")
    assert src.copy_to_host().any() and len(np.unique(src.copy_to_host())) == words, "fill_words repeats itself"
