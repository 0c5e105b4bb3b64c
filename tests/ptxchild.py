"""Compile Numba kernels for a real GPU target in a child process (CUDABOOK_COMPILE_ONLY=1: Numba's compiler
even without a GPU), for tests that read the PTX of kernels the simulator runs."""
import json
import os
import subprocess
import sys

import pytest


# The start of a child's code: Numba's compiler told that the current device is an sm_90 (there is none).
PRELUDE = """import json, cudabook
import numba.cuda.dispatcher as d
from numba import cuda, types
class T: compute_capability = (9, 0)
d.get_current_device = lambda: T()
"""


def ptx_in_child(child: str) -> dict:
    """Run `child` (Python that prints one JSON line {name: ptx}) in a child process; skip without NVVM."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "CUDABOOK_SET_CUDASIM")}
    env["CUDABOOK_COMPILE_ONLY"] = "1"
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if done.returncode and ("NVVM" in done.stderr or "libnvvm" in done.stderr):
        pytest.skip(f"no NVVM here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
