"""Fused Vector-engine instructions: scalar_tensor_tensor and tensor_scalar_reduce."""
import numpy as np

from .. import alu, buffers, checks
from ..cycle_model import costs
from ..errors import require
from ..run import current_run
from .common import as_matrix, issue, operand, operand_values
from .elementwise import alu_op


def _arithmetic(instr, param, operator):
    require(operator.kind == "arith", f"{instr}: {param}={operator!r} must be an arithmetic operator; "
                                      f"bitvec and comparison operators are not supported")


def _apply(operator, value, other, reverse):
    return operator.apply(other, value) if reverse else operator.apply(value, other)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    """dst = (data op0 operand0) op1 operand1: operand0 a number or [P, 1] column, operand1 a full tile."""
    instr = "scalar_tensor_tensor"
    run = current_run()
    first, second = alu_op(instr, "op0", op0), alu_op(instr, "op1", op1)
    _arithmetic(instr, "op0", first)
    _arithmetic(instr, "op1", second)
    p = data.num_partitions
    value0, tile0 = operand(instr, "operand0", operand0, p)
    checks.compute_operands(instr, "vector", {"data": data, "operand0": tile0, "operand1": operand1}, {"dst": dst})
    checks.same_layout(instr, "operand1", operand1, "data", data)
    checks.same_layout(instr, "dst", dst, "data", data)
    require(not (data.buffer is buffers.psum and operand1.buffer is buffers.psum),
            f"{instr}: data and operand1 are both in PSUM; at most one of them may be in PSUM")
    if run.numerics:
        partial = _apply(first, as_matrix(run, data), operand_values(run, value0, p), reverse0)
        dst.write(_apply(second, partial, as_matrix(run, operand1), reverse1), run.precise)
    n = data.free_size
    fast = (data.dtype.name == operand1.dtype.name == "bfloat16" and first is alu.subtract
            and second is alu.multiply and n % 2 == 0)
    issue(run, "vector", instr, max(costs.MIN_II, n if fast else 2 * n), reads=[data, tile0, operand1], writes=[dst])


REDUCE_OPS = (alu.add, alu.multiply, alu.maximum, alu.minimum)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False, name=None):
    """dst = data op0 operand0, and reduce_res = reduce_op of dst along the free axes."""
    instr = "tensor_scalar_reduce"
    run = current_run()
    first = alu_op(instr, "op0", op0)
    _arithmetic(instr, "op0", first)
    require(reduce_op in REDUCE_OPS,
            f"{instr}: reduce_op={reduce_op!r} is not supported; use one of {', '.join(map(repr, REDUCE_OPS))}")
    p = data.num_partitions
    value0, tile0 = operand(instr, "operand0", operand0, p)
    checks.per_partition_vector(instr, "reduce_res", reduce_res, p)
    checks.compute_operands(instr, "vector", {"data": data, "operand0": tile0}, {"dst": dst, "reduce_res": reduce_res})
    checks.same_layout(instr, "dst", dst, "data", data)
    if run.numerics:
        result = _apply(first, as_matrix(run, data), operand_values(run, value0, p), reverse0)
        dst.write(result, run.precise)
        with np.errstate(all="ignore"):
            reduce_res.write(alu.REDUCTIONS[reduce_op](result, axis=1).reshape(p, 1), run.precise)
    issue(run, "vector", instr, max(costs.MIN_II, data.free_size) + costs.MIN_II,
          reads=[data, tile0], writes=[dst, reduce_res])
