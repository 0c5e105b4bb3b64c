"""cudabook.msda.reuse: the share of a block's corners that are distinct, on hand-built samples."""
import numpy as np
import pytest

from cudabook.msda import reuse

SHAPES, STARTS = np.array([[4, 4]]), np.array([0])


def loc_at(points):
    """[1, Lq, M=1, L=1, P, 2] from [[(x, y), ...] per query]: normalized locations of pixel centres."""
    a = np.array(points, np.float32)
    return ((a + 0.5) / 4.0).reshape(1, a.shape[0], 1, 1, a.shape[1], 2)


def test_a_sample_on_a_pixel_centre_reads_its_2x2_block_and_off_map_corners_are_left_out():
    keys = reuse.corner_keys(SHAPES, STARTS, loc_at([[(1, 1)], [(3, 3)]]))
    assert keys[0, 0, 0, 0, 0].tolist() == [5, 6, 9, 10]          # pixels (1,1) (2,1) (1,2) (2,2) of a 4 x 4 map
    assert keys[0, 1, 0, 0, 0].tolist() == [15, -1, -1, -1]       # the bottom-right pixel: three corners off it


def test_two_queries_on_the_same_pixel_share_every_corner_and_far_ones_none():
    same = loc_at([[(1, 1)], [(1, 1)]])
    apart = loc_at([[(0, 0)], [(2, 2)]])
    assert reuse.distinct_share(SHAPES, STARTS, same, queries=2) == 0.5
    assert reuse.distinct_share(SHAPES, STARTS, apart, queries=2) == 1.0
    assert reuse.distinct_share(SHAPES, STARTS, same, queries=1) == 1.0  # runs of one query share nothing


def test_heads_never_share_a_corner():
    loc = np.repeat(loc_at([[(1, 1)]]), 2, axis=2)                # two heads, the same location
    assert reuse.distinct_share(SHAPES, STARTS, loc, queries=1) == 1.0


def test_distinct_pixels_are_counted_per_run_and_head():
    loc = np.repeat(loc_at([[(1, 1)], [(1, 1)], [(0, 0)], [(3, 3)]]), 2, axis=2)     # two heads, four queries
    loc[0, 1, 1] = loc_at([[(2, 2)]])[0, 0, 0]                    # head 1 of query 1 moves one pixel on
    got = reuse.distinct_per_block_head(SHAPES, STARTS, loc, queries=2)
    assert got.tolist() == [[4, 7], [5, 5]]     # run 0: head 0 one 2x2 block twice, head 1 two blocks sharing (2,2)
    assert reuse.distinct_per_block_head(SHAPES, STARTS, loc, queries=2, blocks=1).tolist() == [[4, 7]]
    with pytest.raises(ValueError, match="longer than the 4 queries"):
        reuse.distinct_per_block_head(SHAPES, STARTS, loc, queries=5)


def test_a_run_longer_than_an_image_is_refused():
    with pytest.raises(ValueError, match="longer than the 2 queries"):
        reuse.distinct_share(SHAPES, STARTS, loc_at([[(1, 1)], [(1, 1)]]), queries=3)


def test_a_runs_window_is_the_rectangle_of_its_corners_per_level_and_head():
    loc = np.repeat(loc_at([[(0, 0)], [(2, 1)], [(1, 1)], [(1, 1)]]), 2, axis=2)     # two heads, four queries
    loc[0, 1, 1] = loc_at([[(0, 0)]])[0, 0, 0]                     # head 1 of query 1 stays on the first block
    got = reuse.window_pixels(SHAPES, STARTS, loc, queries=2)
    # run 0, head 0: corners (0..1, 0..1) and (2..3, 1..2): columns 0..3, rows 0..2, 12 pixels; head 1: one 2x2
    # block twice, 4; run 1: (1..2, 1..2) for both queries and heads, 4 each
    assert got.tolist() == [[12, 4], [4, 4]]
    assert reuse.window_pixels(SHAPES, STARTS, loc, queries=2, blocks=1).tolist() == [[12, 4]]
    two_levels = loc_at([[(1, 1), (3, 3)]]).reshape(1, 1, 1, 2, 1, 2)   # one sample on each of two 4 x 4 levels
    shapes, starts = np.array([[4, 4], [4, 4]]), np.array([0, 16])
    assert reuse.window_pixels(shapes, starts, two_levels, queries=1).tolist() == [[4 + 1]]   # off-map corners out
