"""cudabook: the support package of the workbook.

Importing it decides how Numba runs. With a GPU, Numba compiles for it. Without one, Numba must run in its
simulator, and that choice has to be made before numba is imported: so `import cudabook` first, then numba.
In the simulator the warp operations (shuffles, ballot, syncwarp) are added, since the simulator lacks them.
"""
from __future__ import annotations

import os
import sys
import warnings

from . import device
from .device import COMPILE_ONLY, SIMULATOR  # noqa: F401  (decided in device, before numba is imported)

__version__ = "0.1.0"

if SIMULATOR:
    if "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        warnings.warn(
            "numba.cuda was imported before cudabook on a machine with no GPU, so Numba could not be switched "
            "to its simulator. Restart the kernel and run `import cudabook` before importing numba.",
            RuntimeWarning, stacklevel=2)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.environ["CUDABOOK_SET_CUDASIM"] = "1"

from numba import cuda  # noqa: E402  (must follow the simulator switch above)

if SIMULATOR:
    from . import simwarp
    simwarp.install()


def where() -> str:
    """One line for the top of every lesson: what this notebook will run on."""
    g = device.gpu()
    if g:
        return f"GPU: {g.name}, compute capability {g.cc}, {g.sms} SMs"
    return f"Numba's CUDA simulator ({device.why_no_gpu()}): small sizes, no timings"
