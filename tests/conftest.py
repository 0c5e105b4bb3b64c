import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudabook  # noqa: E402  (decides simulator or GPU before numba is imported anywhere)
from cudabook import device  # noqa: E402


def pytest_collection_modifyitems(config, items):
    gpu = device.gpu()
    for item in items:
        if "gpu" in item.keywords and gpu is None:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {device.why_no_gpu()}"))
        elif "hopper" in item.keywords:
            why = device.requirement_unmet((9, 0), "this test")
            if why:
                item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng()
