"""The GEMM lessons' pictures (cudabook/gemm/pictures.py) tell the truth about the kernels.

The wgmma descriptors: LBO, SBO and the k16 steps derived from the TMA layout (the workbook's TMA model on the
rungs' own tensor maps) are the values the kernels pass to smem_desc, read from their sources, and following
them through the PTX ISA's canonical layout reads every element where the wgmma needs it (and a wrong LBO does
not). The grouped tile order: the Python grouped_tile is hopper.cuh's (run in the CPU emulator), each tile comes
once, a wave's panel counts are what the arithmetic of the order gives, and lesson 06's sentences about the
two workloads hold."""
import ctypes
import math
import shutil

import numpy as np
import pytest

from cudabook import SIMULATOR, emulate, lesson, nvrtc
from cudabook.gemm import pictures, s05_wgmma_tma as s05, s06_warp_specialized as s06, waves, wgmma
from cudabook.gemm.benchmark import WORKLOADS


@pytest.mark.parametrize("bn", [64, 128, 256])
@pytest.mark.parametrize("groups", [1, 2])
def test_the_descriptor_offsets_derived_from_the_tma_layout_are_the_kernels(bn, groups):
    stage = pictures.stage_image(64 * groups, bn)
    derived = pictures.derive_strides(stage)
    for rung, params in ((s05, dict(bn=bn, warpgroups=groups)), (s06, dict(bn=max(bn, 128), consumers=groups))):
        if rung is s06 and bn < 128:
            continue
        kernel = pictures.kernel_strides(rung.source(), **rung.config(**params))
        assert (kernel["A"]["sbo"], kernel["A"]["k16_step"]) == (derived["A"]["sbo"], derived["A"]["k16_step"])
        assert (kernel["B"]["sbo"], kernel["B"]["k16_step"]) == (derived["B"]["sbo"], derived["B"]["k16_step"])
        assert kernel["B"]["lbo"] == kernel["constants"]["B_BOX_BYTES"] == stage.b_box_bytes
        if bn > 64:                                  # a second box: LBO is measured, and must be the kernel's
            assert derived["B"]["lbo"] == kernel["B"]["lbo"]
        else:
            assert derived["B"]["lbo"] is None
    kernel = pictures.kernel_strides(s05.source(), **s05.config(bn=bn, warpgroups=groups))
    assert pictures.check_descriptors(stage, kernel) == {"A": 0, "B": 0, "read": groups * 4 * (64 + bn) * 16}
    assert (derived["A"]["sbo"], derived["B"]["sbo"], derived["A"]["k16_step"], derived["B"]["k16_step"]) == \
        (wgmma.A_K_MAJOR["sbo"], wgmma.B_MN_MAJOR["sbo"], wgmma.K16_STEP_A, wgmma.K16_STEP_B)


def test_the_measured_offsets_are_the_ones_lesson_05_explains():
    derived = pictures.derive_strides(pictures.stage_image(128, 128))
    row = 128                                         # one 128-byte swizzle span: 64 bf16
    assert derived["A"] == dict(sbo=8 * row, next_chunk=16, k16_step=16 * 2, lbo=None)
    assert derived["B"] == dict(sbo=8 * row, next_chunk=16, lbo=s05.BK * row, k16_step=16 * row)


def test_a_wrong_lbo_reads_the_wrong_columns_only_past_the_first_box():
    kernel = pictures.kernel_strides(s05.source(), **s05.config())
    wrong = {**kernel, "B": {**kernel["B"], "lbo": 16}}
    wide, narrow = pictures.stage_image(128, 128), pictures.stage_image(128, 64)
    assert pictures.check_descriptors(wide, wrong)["B"] == 2 * 4 * 16 * 64    # columns 64-127 of every step
    assert pictures.check_descriptors(narrow, wrong)["B"] == 0
    swapped = {**kernel, "B": {**kernel["B"], "lbo": kernel["B"]["sbo"], "sbo": kernel["B"]["lbo"]}}
    assert pictures.check_descriptors(wide, swapped)["B"] > 0
    no_swizzle_view = pictures.operand_addresses(wgmma.descriptor(0, 16, 1024, swizzle="none"), 64, False)
    swizzled = pictures.operand_addresses(wgmma.descriptor(0, 16, 1024), 64, False)
    assert (no_swizzle_view != swizzled).any()        # the swizzle bits of the descriptor matter


def test_the_drawing_colours_every_chunk_of_step_0_once():
    stage = pictures.stage_image(128, 128)
    strides = pictures.derive_strides(stage)
    da, db = pictures.descriptors(stage, strides, 0)
    core, _ = pictures.chunk_map(pictures.operand_addresses(da, 64, False), 64 * 128, False)
    assert sorted(np.bincount(core[core >= 0])) == [8] * 16          # 16 core matrices of 8 chunks
    for j in range(2):
        first = stage.a_bytes + j * stage.b_box_bytes
        core, _ = pictures.chunk_map(pictures.operand_addresses(db, 128, True), stage.b_box_bytes, True, first)
        assert (core >= 0).sum() == 16 * 8 and (core[16:] < 0).all()   # 16 lines of k, 8 chunks each


# ------------------------------------------------------------------------------------------ the tile order
@pytest.mark.parametrize("tiles_m, tiles_n", [(64, 32), (13, 7), (5, 11), (1, 4)])
@pytest.mark.parametrize("group_m", [1, 3, 8, 16])
def test_the_grouped_order_visits_each_tile_once(tiles_m, tiles_n, group_m):
    order = pictures.tile_order(tiles_m, tiles_n, group_m)
    assert sorted(order.ravel()) == list(range(tiles_m * tiles_n))
    if group_m == 1:
        assert (order == np.arange(tiles_m * tiles_n).reshape(tiles_m, tiles_n)).all()


def test_a_waves_panels_are_what_the_order_gives():
    tiles_m, tiles_n, wave = 64, 32, 132
    assert pictures.wave_panels(tiles_m, tiles_n, 1, wave) == (math.ceil(wave / tiles_n), tiles_n)
    assert pictures.wave_panels(tiles_m, tiles_n, 8, wave) == (8, math.ceil(wave / 8))
    # wave 1: the rest of group 0 (columns wave // 8 .. tiles_n - 1 of rows 0-7), then group 1 (rows 8-15) from
    # column 0 on
    rest_of_group = 2 * wave - 8 * tiles_n
    assert pictures.wave_panels(tiles_m, tiles_n, 8, wave, wave=1) == \
        (16, tiles_n - wave // 8 + math.ceil(rest_of_group / 8))
    t = pictures.wave_traffic(8192, 8192, 8192, 128, 256, 8, wave)
    assert t["waves"] == math.ceil(tiles_m * tiles_n / wave) and (t["a_panels"], t["b_panels"]) == (8, 17)


def test_lesson_06s_sentences_on_the_two_workloads_hold():
    """Grouping cuts the bytes of panels a wave reads at the larger workload, not at the smaller one."""
    bm, bn = waves.tile_of(s06.PARAMS)
    recorded = lesson.recorded_sweeps("gemm", "06_warp_specialized", "group_m")
    assert recorded, "lesson 06 draws the order for the card of its recorded group_m sweep"
    sms = recorded[0]["machine"]["sms"]
    assert recorded[0]["size_used"] == {k: WORKLOADS[0][k] for k in "MNK"}
    small, large = ({g: pictures.wave_traffic(w["M"], w["N"], w["K"], bm, bn, g, sms)["bytes_per_wave"]
                     for g in (1, s06.PARAMS["group_m"])} for w in (WORKLOADS[0], WORKLOADS[-1]))
    assert large[s06.PARAMS["group_m"]] < 0.75 * large[1]
    assert small[s06.PARAMS["group_m"]] >= small[1]


GROUPED = r"""#include "hopper.cuh"
extern "C" __global__ void order(int* out, int tiles_m, int tiles_n, int group_m) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tiles_m * tiles_n) return;
  int tm, tn;
  grouped_tile(t, tiles_m, tiles_n, group_m, tm, tn);
  out[2 * t] = tm;
  out[2 * t + 1] = tn;
}
"""


@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")), reason="no host C++ compiler")
@pytest.mark.skipif(not SIMULATOR, reason="the emulator runs where Numba runs in its simulator")
def test_grouped_tile_is_hopper_cuhs():
    with emulate.emulating():
        kern = nvrtc.load(nvrtc.compile(GROUPED, name="grouped_tile_test.cu"), "order")
        for tiles_m, tiles_n, group_m in ((13, 7, 8), (9, 5, 1), (20, 3, 16), (16, 16, 4)):
            out = np.full(2 * tiles_m * tiles_n, -1, np.int32)
            kern.launch(math.ceil(tiles_m * tiles_n / 64), 64, [out.ctypes.data, tiles_m, tiles_n, group_m],
                        [ctypes.c_void_p] + [ctypes.c_int] * 3)
            mine = [pictures.grouped_tile(t, tiles_m, tiles_n, group_m) for t in range(tiles_m * tiles_n)]
            assert out.reshape(-1, 2).tolist() == [list(x) for x in mine]
