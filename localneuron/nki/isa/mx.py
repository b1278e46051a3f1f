"""MX (microscaling) quantisation and matmul on NeuronCore-v4: quantize_mx and nc_matmul_mx.

An MX scaling group is 8 partitions x 4 consecutive elements (the 4 elements of one packed _x4 item);
its scale is a uint8 power-of-two exponent with bias 127. Scale tiles use the hardware layout: the scale
of the group of partitions 8g..8g+7 lives in partition 32 * (g // 4) + g % 4 of the scale tile, i.e. in
the first four partitions of the quadrant that holds the data.
"""
import numpy as np

from .. import checks
from ..cycle_model import costs
from ..dtypes import PACKED, pack, unpack
from ..errors import require
from ..generation import at_least
from ..run import current_run
from .common import as_matrix, issue
from .matmul import _psum_dst_dtype, accumulate_product

GROUP_PARTITIONS = 8
FLOAT32_EXPONENT_BIAS = 127
QUADRANT = 32


def _needs_gen4(op, run):
    require(at_least(run.target, "gen4"), f"{op}: MX quantisation and matmul need NeuronCore-v4 (gen4/trn3); "
                                          f"target is {run.target.name}")


def scale_rows(partitions):
    """Rows of the hardware-layout scale tile holding the scales of each 8-partition group."""
    return [QUADRANT * (g // 4) + g % 4 for g in range(partitions // GROUP_PARTITIONS)]


def largest_exponent(dtype):
    """Unbiased exponent of the element format's largest finite value (e4m3fn 8, e5m2 15, e2m1 2)."""
    return int(np.frexp(dtype.element.float_format.max_finite)[1]) - 1


def quantize_mx(dst, src, dst_scale, name=None):
    """Quantise float src [P, 4F] to packed MX dst [P, F] and its scales dst_scale (uint8, hardware layout):
    each group's scale is its largest float32 exponent minus the element format's largest exponent."""
    op = "quantize_mx"
    run = current_run()
    _needs_gen4(op, run)
    checks.compute_operands(op, "vector", {"src": src}, {"dst": dst, "dst_scale": dst_scale})
    require(dst.dtype in PACKED, f"{op}: dst must be a packed MX type ({', '.join(map(str, PACKED))}), got {dst.dtype}")
    require(dst_scale.dtype.name == "uint8", f"{op}: dst_scale must be uint8, got {dst_scale.dtype}")
    checks.float_dtype(op, "src", src)
    p = src.num_partitions
    require(p % GROUP_PARTITIONS == 0, f"{op}: src has {p} partitions; MX groups are {GROUP_PARTITIONS} partitions")
    require(dst.num_partitions == p and dst.free_size * dst.dtype.lanes == src.free_size,
            f"{op}: dst must be [{p}, {src.free_size // dst.dtype.lanes}] packed items for a [{p}, {src.free_size}] src, "
            f"got {list(dst.shape)}")
    rows = scale_rows(p)
    require(dst_scale.num_partitions > rows[-1] and dst_scale.free_size == dst.free_size,
            f"{op}: dst_scale must reach partition {rows[-1]} and hold {dst.free_size} scales per partition, "
            f"got {list(dst_scale.shape)}")
    if run.numerics:
        x = as_matrix(run, src)
        groups = p // GROUP_PARTITIONS
        items = dst.free_size
        biased = ((x.view(np.uint32) >> 23) & 0xFF).astype(np.int32).reshape(groups, GROUP_PARTITIONS, items, 4)
        scale = np.clip(biased.max(axis=(1, 3)) - largest_exponent(dst.dtype), 0, 255)      # [groups, items]
        factor = np.exp2(scale.astype(np.float64) - FLOAT32_EXPONENT_BIAS)
        scaled = x.reshape(groups, GROUP_PARTITIONS, items, 4) / factor[:, None, :, None]
        dst.write(pack(scaled.reshape(p, items * 4), dst.dtype), run.precise)
        scales = as_matrix(run, dst_scale, fp32=False).copy()
        scales[rows] = scale
        dst_scale.write(scales, run.precise)
    issue(run, "vector", op, costs.vector_single_input(src.free_size), reads=[src], writes=[dst, dst_scale])


def _dequantised(run, data, scale, param):
    """[K, N, 4] float values of a packed MX operand with its group scales applied."""
    k, n = data.num_partitions, data.free_size
    values = unpack(as_matrix(run, data, fp32=False), data.dtype).reshape(k, n, data.dtype.lanes)
    exponents = as_matrix(run, scale, fp32=False).astype(np.float64)[scale_rows(k)][:, :n]   # [groups, N]
    factors = np.repeat(np.exp2(exponents - FLOAT32_EXPONENT_BIAS), GROUP_PARTITIONS, axis=0)
    return values * factors[:, :, None]


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, accumulate=None, name=None):
    """dst[M, N] (+)= sum over partitions k and lanes q of stationary[k, m, q] * moving[k, n, q], each
    element scaled by its group's power of two: a matmul of packed MX operands contracting 4 * K values."""
    op = "nc_matmul_mx"
    run = current_run()
    _needs_gen4(op, run)
    checks.compute_operands(op, "tensor", {"stationary": stationary, "moving": moving,
                                           "stationary_scale": stationary_scale, "moving_scale": moving_scale},
                            {"dst": dst})
    for param, tile in (("stationary", stationary), ("moving", moving)):
        require(tile.dtype in PACKED, f"{op}: {param} must be a packed MX type, got {tile.dtype}")
    for param, tile in (("stationary_scale", stationary_scale), ("moving_scale", moving_scale)):
        require(tile.dtype.name == "uint8", f"{op}: {param} must be uint8, got {tile.dtype}")
    k = stationary.num_partitions
    require(moving.num_partitions == k, f"{op}: stationary has {k} partitions but moving has {moving.num_partitions}")
    require(k % GROUP_PARTITIONS == 0, f"{op}: the contraction has {k} partitions; MX groups are {GROUP_PARTITIONS}")
    m, n = stationary.free_size, moving.free_size
    require(m <= run.target.pe_array, f"{op}: stationary free size {m} exceeds gemm_stationary_fmax={run.target.pe_array}")
    require(dst.num_partitions == m and dst.free_size == n,
            f"{op}: dst must have shape [{m}, {n}], got {list(dst.shape)}")
    _psum_dst_dtype(op, run, dst)
    if run.numerics:
        a = _dequantised(run, stationary, stationary_scale, "stationary")
        b = _dequantised(run, moving, moving_scale, "moving")
        accumulate_product(op, run, dst, np.einsum("kmq,knq->mn", a, b).astype(np.float32), accumulate)
    # Four packed elements per item: the array streams `n` moving columns as a bf16 matmul would.
    cycles = costs.matmul(n, m, False)
    run.timeline.compute("tensor", op, cycles, reads=[stationary, moving, stationary_scale, moving_scale],
                         writes=[dst])
