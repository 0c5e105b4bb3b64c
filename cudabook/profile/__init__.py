"""Nsight Compute from the notebook: what a stage's kernels did, in the GPU's own counters.

    p = profile.profile("resample", "03_coalesced")        # runs ncu now (a GPU and ncu needed)
    p = profile.show("resample", "02_warp_shuffles", "03_coalesced")   # live if it can, else the recorded one
    p.kernel("03_coalesced")["sectors_per_request"]

A profile is one row per kernel a stage launches (a search prepass and its main kernel are two rows): time,
DRAM throughput and bytes, sectors per global load request, L2 hit rate, achieved occupancy, registers per
thread, and the reasons its warps were stalled, largest first.

How it measures. `ncu` runs a small driver, `python -m cudabook.profile --run TRACK STAGE`, that uploads a problem
of the track's first benchmark size (or `size`), launches the stage once to compile and warm up, and then once
more between cuProfilerStart and cuProfilerStop. ncu is started with `--profile-from-start off`, so it measures
exactly the kernels of that second launch, not the uploads, the warm-up or anything else. It replays each
kernel as many times as its counters need (one replay per group of counters) and restores memory between
replays. Clocks are left alone (`--clock-control none`), as the benchmark leaves them; but ncu flushes the caches
before each replay (its default `--cache-control all`) and runs each kernel alone, so a profile's µs is one cold
launch, not the ladder's median of launches back to back. Extra ncu options can be given in CUDABOOK_NCU_ARGS.

Records. `python -m cudabook.profile --record TRACK [STAGES...]` writes results/profiles/<gpu>_<track>.json:
the card, driver, CUDA and ncu versions, the workload, and per stage per kernel every counter read. Without a
GPU (or without ncu), `show` draws the recorded profile and says on which card and when it was measured.

Where ncu is: CUDABOOK_NCU, else `ncu` on PATH, else the usual install places (/usr/local/cuda/bin,
/opt/nvidia/nsight-compute/<version>).

The package, one module a purpose: metrics (what to read), ncu (finding and running Nsight Compute), parsing
(its CSV), table (derived quantities, the Profile table), records (results/profiles/), measure (profile, record),
display (show), edits (profiles of kernel edits, kept as readings) and cli (python -m cudabook.profile).
"""
from __future__ import annotations

from ..results import RecordError, read_record, require_field  # noqa: F401  (as before the split)
from .cli import main
from .display import show, variants
from .edits import profile_edit, show_edits
from .measure import profile, record
from .metrics import COLUMN_NOTES, COLUMNS, METRICS, STALL_FAMILIES, STALL_REASONS, STALLS, metric_names
from .ncu import (OPTIONAL, PERMISSION_HELP, PLACES, ROOT, NcuForbidden, NcuMissing, ProfileUnavailable,
                  available_metrics, collect, find_ncu, ncu_version, require_ncu)
from .parsing import parse_csv, short_name, to_base
from .records import (PROFILES, SCHEMA, from_record, load_record, load_records, new_record, record_path, recorded,
                      save_record, stage_entry, validate_record, variant_folder)
from .table import Profile, derive
