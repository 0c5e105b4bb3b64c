"""Multi-scale deformable attention (Deformable DETR's sampling core): the deformable attention track.

    STAGES                                          the ladder, in order
    run(stage, value, spatial_shapes, level_start_index, sampling_locations, attention_weights, **params)
                                                    -> out, a bfloat16 NumPy array [N, Lq, M * D]
    reference(...the same five inputs)              -> float64 [N, Lq, M * D]

value is bf16 [N, S, M, D]: L feature maps (levels) of H_l x W_l pixels, flattened one after the other
(S = sum of H_l * W_l), M heads of D channels each. spatial_shapes [L, 2] holds each level's (H, W),
level_start_index [L] the row where each level starts (the prefix sums of H * W). sampling_locations float32
[N, Lq, M, L, P, 2] are normalized (x, y), and attention_weights float32 [N, Lq, M, L, P] weigh the samples.
Each sample is bilinear exactly as grid_sample(align_corners=False, padding_mode="zeros"); every stage computes
in float32 and rounds the output to bf16 (nearest even) once. Every rung takes D any multiple of 8 up to 128.
"""
from __future__ import annotations

from ..errors import StageUnavailable  # noqa: F401  (one error for every track)
from ..kit.ladder import face
from . import benchmark as bench  # noqa: F401  (the track's workloads, peers and table for cudabook.results)
from .checking import cases, compare, grading_cases, judge  # noqa: F401
from .inputs import (BF16, SEED_LEVELS, level_starts, random_problem, reference, reference_with_bound,  # noqa: F401
                     to_bf16, validate)
from .problem import Problem, upload  # noqa: F401

NAME = "msda"
TITLE = "multi-scale deformable attention (bf16 values, float32 math)"
MAP_TITLE = "Deformable attention: an irregular gather with borders"
_LADDER = face(globals(), ("01_naive", "02_warp_cooperative", "03_smem_tiles", "04_tma_boxes", "05_lane_groups"),
               "deformable attention stage")


def run(stage_name, value, spatial_shapes, level_start_index, sampling_locations, attention_weights, **params):
    """Deformable attention with one stage of the ladder; returns a bfloat16 NumPy array [N, Lq, M * D]."""
    return _LADDER.run(stage_name, upload, value, spatial_shapes, level_start_index, sampling_locations,
                       attention_weights, **params)
