"""TensorE instructions: nc_matmul (with PSUM accumulation) and nc_transpose."""
import numpy as np

from .. import buffers, checks
from ..cycle_model import costs
from ..errors import require
from ..run import current_run
from ..generation import at_least
from .common import as_matrix, issue, pick_engine
from .constants import matmul_perf_mode

VECTOR_TRANSPOSE_MAX = 32   # VectorE transposes 32x32 blocks (one per partition quadrant)
FP32_INPUTS = ("float32", "tfloat32")
FP8_INPUTS = ("float8_e4m3", "float8_e5m2", "float8_e4m3fn")


def _psum_dst_dtype(op, run, dst):
    allowed = ("float32", "bfloat16") if run.target.has("bf16_psum") else ("float32",)
    require(dst.dtype.name in allowed,
            f"{op}: dst dtype {dst.dtype} is not supported in PSUM on {run.target.name}; use {' or '.join(allowed)}")


def _fits_bank(op, run, dst, spans_banks_ok):
    """A matmul writes one 2 KiB PSUM bank per partition (all 8 on gen4 with large moving tiles)."""
    bank = run.target.psum_bank_bytes
    first_byte = (dst.offset % dst.storage.row_size) * dst.dtype.itemsize
    last_byte = first_byte + (dst.free_size - 1) * dst.dtype.itemsize
    if not spans_banks_ok:
        require(first_byte // bank == last_byte // bank,
                f"{op}: dst needs {dst.free_size * dst.dtype.itemsize} bytes per partition from byte "
                f"{first_byte}, crossing a PSUM bank boundary; an output must fit one {bank}-byte bank "
                f"({bank // 4} fp32 values, psum_bank_fmax=512)")


def accumulate_product(op, run, dst, product, accumulate):
    """Write a TensorE product into PSUM: accumulate=False overwrites, True adds, None follows the
    compiler's rule (the first matmul of an accumulation group overwrites, later ones add)."""
    cells = dst.flat_indices().ravel()
    if accumulate is True:
        require(at_least(run.target, "gen4") or dst.storage.matmul_open[cells].all(),
                f"{op}: accumulate=True onto PSUM that no matmul initialised is undefined on "
                f"{run.target.name}; start the accumulation group with accumulate=False or None")
        add = np.ones(cells.shape, dtype=bool)
    elif accumulate is None:
        add = dst.storage.matmul_open[cells]
    else:
        add = np.zeros(cells.shape, dtype=bool)
    previous = as_matrix(run, dst).ravel()
    dst.write(np.where(add, previous + product.ravel(), product.ravel()), run.precise)
    dst.storage.matmul_open[cells] = True


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None):
    op = "nc_matmul"
    run = current_run()
    checks.compute_operands(op, "tensor", {"stationary": stationary, "moving": moving}, {"dst": dst})
    contraction = stationary.num_partitions
    require(moving.num_partitions == contraction,
            f"{op}: stationary has {contraction} partitions but moving has {moving.num_partitions}; "
            f"the contraction dimension (partition axis) of both must match")
    m, n = stationary.free_size, moving.free_size
    require(m <= run.target.pe_array,
            f"{op}: stationary free size is {m}, exceeding gemm_stationary_fmax={run.target.pe_array}")
    if is_transpose:   # a pass-through transpose (moving is the identity) writes the data's own dtype, as nc_transpose
        require(dst.dtype.name == "float32" or dst.dtype is stationary.dtype,
                f"{op}: is_transpose dst dtype {dst.dtype} must be float32 or match stationary ({stationary.dtype})")
    else:
        _psum_dst_dtype(op, run, dst)
    moving_limit = (run.target.gemm_moving_fmax_bf16_dst if dst.dtype.name == "bfloat16"
                    else run.target.gemm_moving_fmax_fp32_dst)
    require(n <= moving_limit,
            f"{op}: moving free size is {n}, exceeding gemm_moving_fmax={moving_limit} on {run.target.name}")
    require(dst.num_partitions == m and dst.free_size == n,
            f"{op}: dst must have shape [{m}, {n}] (stationary free size x moving free size), "
            f"got {list(dst.shape)}")
    _fits_bank(op, run, dst, spans_banks_ok=at_least(run.target, "gen4"))
    for param, tile in (("stationary", stationary), ("moving", moving)):
        checks.float_dtype(op, param, tile)
        require(tile.dtype.name not in ("float8_e4m3fn",) or run.target.has("fp8_fn"),
                f"{op}: {param} dtype {tile.dtype} needs gen4, target is {run.target.name}")
    if (stationary.dtype.name in FP32_INPUTS) != (moving.dtype.name in FP32_INPUTS):
        require(False, f"{op}: stationary is {stationary.dtype} but moving is {moving.dtype}; "
                       f"if one input is float32/tfloat32 the other must be too")
    double_row = perf_mode is matmul_perf_mode.double_row
    if double_row:
        require(at_least(run.target, "gen3"), f"{op}: perf_mode=double_row needs gen3 or newer, target is {run.target.name}")
        require(stationary.dtype.name in FP8_INPUTS and moving.dtype.name in FP8_INPUTS,
                f"{op}: perf_mode=double_row needs fp8 inputs, got {stationary.dtype} and {moving.dtype}")

    if run.numerics:
        accumulate_product(op, run, dst, as_matrix(run, stationary).T @ as_matrix(run, moving), accumulate)

    fp32 = stationary.dtype.name in FP32_INPUTS
    cycles = costs.matmul(n, m, fp32)
    if fp32 and (is_stationary_onezero or is_moving_onezero):
        cycles //= 2
    if double_row:
        cycles //= 2
    accumulating = accumulate is not False
    run.timeline.compute("tensor", op, cycles, reads=[stationary, moving] + ([dst] if accumulating else []),
                         writes=[dst])


def nc_transpose(dst, data, engine=None, name=None):
    """Swap the partition and free axes: TensorE (up to the PE array, SBUF -> PSUM) or VectorE (<=32x32)."""
    op = "nc_transpose"
    run = current_run()
    unit = pick_engine(op, engine, {"tensor", "vector"}, "tensor")
    checks.compute_operands(op, unit, {"data": data}, {"dst": dst})
    limit = run.target.pe_array if unit == "tensor" else VECTOR_TRANSPOSE_MAX
    p, f = data.num_partitions, data.free_size
    require(p <= limit and f <= limit,
            f"{op}: data is [{p}, {f}]; the {unit} engine transposes at most [{limit}, {limit}]")
    require(dst.num_partitions == f and dst.free_size == p,
            f"{op}: dst must have shape [{f}, {p}] (data transposed), got {list(dst.shape)}")
    if unit == "tensor":
        require(dst.dtype.name == "float32" or dst.dtype is data.dtype,
                f"{op}: dst dtype {dst.dtype} must be float32 or match data ({data.dtype})")
    if run.numerics:
        dst.write(as_matrix(run, data).T, run.precise)
        if dst.buffer is buffers.psum:
            dst.storage.matmul_open[dst.flat_indices().ravel()] = False
    cycles = costs.pe_transpose(p, f) if unit == "tensor" else costs.vector_single_input(f)
    if unit == "tensor":
        run.timeline.compute("tensor", op, cycles, reads=[data], writes=[dst])
    else:
        issue(run, "vector", op, cycles, reads=[data], writes=[dst])
