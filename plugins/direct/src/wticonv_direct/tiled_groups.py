"""direct.tiled's CPU blocks for groups of few channels (tiled_plan's CPU planner asks).

Grouped convolutions whose groups hold fewer channels than a block's rows or columns
filled those blocks mostly with padding: :func:`group_tiles` puts whole groups in the
fwd/bwd row tiles (tiled_cpu.cl's ``TILED_GT``), :func:`dot_tile` sizes the backward
weights' dot-product blocks to a group.
"""

from __future__ import annotations

from wticonv.runtime.kit import round_up

from .tiled_maps import Maps

__all__ = ["GROUP_TILE_MIN_BLOCKS", "dot_tile", "group_tiles"]


def dot_tile(mp: Maps, dot_m: int, dot_n: int) -> tuple[int, int]:
    """``(rows, columns)`` of a tiled_dot work-item's dot products on map ``mp``:
    ``dot_m`` x ``dot_n``, except for groups (G > 1), whose K/G rows and C/G x R x S
    columns are short: rows rounded up to 4 (at most ``dot_m``), and 36 columns where they count a
    multiple of 36 (3x3 filters over a multiple of 4 channels). ResNeXt-50's grouped 3x3
    backward weights at N=8 ran blocks of 32 x 32 with 4 x 36 of them real: 4 x 36
    blocks 3-5x faster on 4 channels a group, 8 x 36 3x on 8, 16 x 36 2.1x on RegNet's 16;
    32 x 36 1.2-1.3x on 24 and 32 (2-core Zen 4, PoCL 3.1, best of 5)."""
    if mp.G == 1:
        return dot_m, dot_n
    return min(dot_m, round_up(mp.M, 4)), 36 if mp.P % 36 == 0 else dot_n


#: Position blocks of a grouped plan (:func:`group_tiles`) from which each work-item
#: runs every row tile of its block: enough work-items for PoCL to spread over the cores.
GROUP_TILE_MIN_BLOCKS = 64


def group_tiles(mp: Maps, mb: int, npos: int) -> tuple[int, int, int]:
    """``(gt, rows, shares)`` of a CPU fwd/bwd map whose groups have fewer channels
    (``mp.M``) than a row tile of ``mb``: ``gt`` whole groups per tile of ``rows`` = gt x M
    rows (gt = mb // M; where it is 1, one group's M channels exactly), and the tiles of
    a block of positions split into ``shares`` work-items (1: one work-item sets its lanes
    up once for all G / gt tiles). ``(1, mb, 0)`` for other maps.

    ResNeXt-50's 3x3 layers (32 groups of 4 to 32 channels) ran rows of 16 with 4 of them
    used, set up for 36 reduction steps (the 4 channels x 3 x 3 of one group): forward on
    56x56 and 28x28 pictures at N=8 3.5x and 2.4x faster with tiles of 4 groups, backward
    data at stride 1 1.1-2x (2-core Zen 4, PoCL 3.1). Backward data at stride 2 (a map
    per stride phase, each writing every second pixel of dx across all the groups' planes)
    ran 1.13x slower this way on 56x56 pictures, and lanes loaded element by element (the
    "gather" mode) load once per group and step: both keep one group a tile (the caller
    asks only for single-map plans with vector lanes)."""
    if mp.G == 1 or mp.M >= mb:
        return 1, mb, 0
    gt = mb // mp.M
    if gt == 1:
        return 1, mp.M, 0
    tiles = -(-mp.G // gt)
    shares = 1 if npos >= GROUP_TILE_MIN_BLOCKS else min(
        tiles, -(-GROUP_TILE_MIN_BLOCKS // npos))
    return gt, gt * mp.M, shares
