"""GEMM efficiency per shape: the fraction of TensorE's tile rule (tiles.gemm_cycles) a well-blocked GEMM reaches, read
from the table benchmarks/gemm_table.py generates from the NKI cycle model (gemm_efficiency_table.py, which says
how it was made)."""
import bisect
import functools
import math

from localneuron.costmodel.gemm_efficiency_table import CONTRACTION, MOVING, STATIONARY, TABLE


def _nearest(grid: tuple, size: int) -> int:
    """The grid point nearest `size` in log space, clamped to the grid."""
    i = bisect.bisect_left(grid, size)
    if i == 0:
        return grid[0]
    if i == len(grid):
        return grid[-1]
    low, high = grid[i - 1], grid[i]
    return low if math.log(size / low) <= math.log(high / size) else high


@functools.lru_cache(maxsize=None)
def efficiency(chip: str, m: int, k: int, n: int, fp32: bool) -> float:
    """The fraction of the tile rule an [m, k] @ [k, n] GEMM reaches on one NeuronCore of `chip` ("trn1", "trn2",
    "trn3"), in (0, 1]: the nearest grid shape's entry."""
    if min(m, k, n) <= 0:
        raise ValueError(f"a GEMM needs positive sizes, got m={m}, k={k}, n={n}")
    stationary, moving = sorted((m, n))
    key = (_nearest(STATIONARY, stationary), _nearest(CONTRACTION, k), _nearest(MOVING, moving))
    return TABLE[chip, bool(fp32)][min(key[0], key[2]), key[1], key[2]]
