"""Is a kernel right? Every track answers the same way: fresh random inputs, an output poisoned with NaN so an
unwritten element fails, a float64 reference, a tolerance derived from the arithmetic, and a diagnosis.

    check_case(track, launch, inputs)      any track: upload, poison, launch, judge (cudabook.track)
    Verdict, bf16_half_ulp                 shared by every track's judge

The resampling lessons, written before there were other tracks, call its checks by their short names here
(`check.check_launch(s01.launch, B, S, T, D)`, `check.compare`, `check.check_on`); they live in
cudabook/resample/checking.py, beside the track they check.
"""
from __future__ import annotations

from .resample.checking import EPS32, check_launch, check_on, compare, diagnose  # noqa: F401
from .track import check_case  # noqa: F401
from .verdict import Verdict, bf16_half_ulp  # noqa: F401
