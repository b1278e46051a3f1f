"""Element-wise instructions: tensor_tensor, tensor_scalar, tensor_copy, memset."""
import numpy as np

from .. import alu, buffers, checks
from ..cycle_model import costs
from ..errors import NkiUsageError, require
from ..run import current_run
from .common import as_matrix, issue, operand, operand_values, pick_engine

ALL_ENGINES = {"vector", "scalar", "gpsimd"}
# ScalarE (gen3+) runs tensor_scalar only in these (op0, op1) forms.
SCALAR_ENGINE_FORMS = {(alu.multiply, alu.add), (alu.multiply, None), (alu.add, None)}


def alu_op(op, param, value):
    if not isinstance(value, alu.AluOp):
        raise NkiUsageError(f"{op}: {param} must be an ALU operator such as nl.add or nl.maximum, got {value!r}")
    return value


def _engine_supports(op, param, operator, engine, run):
    require(engine in operator.engines,
            f"{op}: {param}={operator!r} is not supported on the {engine} engine "
            f"(supported: {', '.join(sorted(operator.engines))})")
    if engine == "scalar":
        require(run.target.has("scalar_alu"),
                f"{op}: the Scalar engine runs ALU operators from gen3; target is {run.target.name}")


def _bitvec_dtypes(op, operator, tiles):
    if operator.kind == "bitvec":
        for param, tile in tiles.items():
            if tile is not None:
                checks.integer_dtype(op, param, tile)


def _values(run, tile, operator):
    # Bitwise operators see raw integer bits; everything else computes in fp32.
    return as_matrix(run, tile, fp32=operator.kind != "bitvec")


def _single_input_cycles(run, unit, instr, data, dst):
    """Cost of a one-input element-wise instruction on whichever engine runs it."""
    n = data.free_size
    if unit == "gpsimd":
        return costs.gpsimd(n)
    if unit == "scalar":
        return costs.activation(n, reads_accumulator=False)
    return max(costs.MIN_II, costs.vector_single_input(n) // costs.perf_mode_speedup(instr, (data, dst), run.target))


def tensor_tensor(dst, data1, data2, op, engine=None, name=None):
    instr = "tensor_tensor"
    run = current_run()
    operator = alu_op(instr, "op", op)
    all_int32 = all(t.dtype.name == "int32" for t in (data1, data2))
    default = "gpsimd" if operator is alu.power or (all_int32 and operator.kind == "arith") else "vector"
    unit = pick_engine(instr, engine, {"vector", "gpsimd"}, default)
    _engine_supports(instr, "op", operator, unit, run)
    checks.compute_operands(instr, unit, {"data1": data1, "data2": data2}, {"dst": dst})
    checks.same_layout(instr, "data1", data1, "data2", data2)
    checks.same_layout(instr, "dst", dst, "data1", data1)
    require(not (data1.buffer is buffers.psum and data2.buffer is buffers.psum),
            f"{instr}: data1 and data2 are both in PSUM; at most one operand may be in PSUM")
    _bitvec_dtypes(instr, operator, {"data1": data1, "data2": data2, "dst": dst})
    if run.numerics:
        dst.write(operator.apply(_values(run, data1, operator), _values(run, data2, operator)), run.precise)
    psum_operand = buffers.psum in (data1.buffer, data2.buffer)
    fast = costs.perf_mode_speedup(instr, (data1, data2, dst), run.target) > 1 and operator in (
        alu.add, alu.multiply, alu.subtract)
    cycles = costs.vector_tensor_tensor(data1.free_size, psum_operand, fast)
    if unit == "gpsimd":
        cycles = costs.gpsimd(data1.free_size)
    issue(run, unit, instr, cycles, reads=[data1, data2], writes=[dst])


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=None, name=None):
    """dst = (data op0 operand0) op1 operand1, operands scalars or [P, 1] fp32 tiles."""
    instr = "tensor_scalar"
    run = current_run()
    first = alu_op(instr, "op0", op0)
    second = alu_op(instr, "op1", op1) if op1 is not None else None
    unit = pick_engine(instr, engine, ALL_ENGINES, "vector")
    for param, operator in (("op0", first), ("op1", second)):
        if operator is not None:
            _engine_supports(instr, param, operator, unit, run)
    if second is not None:
        require((first.kind == "bitvec") == (second.kind == "bitvec"),
                f"{instr}: op0={first!r} and op1={second!r} must both be bitvec or both arithmetic operators")
    if unit == "scalar":
        require((first, second) in SCALAR_ENGINE_FORMS,
                f"{instr}: the Scalar engine supports only multiply+add, multiply or add, got op0={first!r}, op1={second!r}")
    p = data.num_partitions
    value0, tile0 = operand(instr, "operand0", operand0, p)
    value1, tile1 = operand(instr, "operand1", operand1, p) if second is not None else (None, None)
    checks.compute_operands(instr, unit, {"data": data, "operand0": tile0, "operand1": tile1}, {"dst": dst})
    checks.same_layout(instr, "dst", dst, "data", data)
    _bitvec_dtypes(instr, first, {"data": data, "dst": dst})
    if run.numerics:
        result = _values(run, data, first)
        for operator, value, reverse in ((first, value0, reverse0), (second, value1, reverse1)):
            if operator is None:
                continue
            scalar = operand_values(run, value, p)
            if operator.kind == "bitvec":
                scalar = np.asarray(scalar).astype(result.dtype)
            result = operator.apply(scalar, result) if reverse else operator.apply(result, scalar)
        dst.write(result, run.precise)
    issue(run, unit, instr, _single_input_cycles(run, unit, instr, data, dst), reads=[data, tile0, tile1], writes=[dst])


def tensor_copy(dst, src, engine=None, name=None):
    """Copy (and convert) a tile; bit-exact when the dtypes match, through fp32 otherwise."""
    instr = "tensor_copy"
    run = current_run()
    unit = pick_engine(instr, engine, ALL_ENGINES, "vector")
    checks.compute_operands(instr, unit, {"src": src}, {"dst": dst})
    checks.same_layout(instr, "dst", dst, "src", src)
    if run.numerics:
        dst.write(as_matrix(run, src, fp32=False), run.precise)
    issue(run, unit, instr, _single_input_cycles(run, unit, instr, src, dst), reads=[src], writes=[dst])


def memset(dst, value, engine=None, name=None):
    instr = "memset"
    run = current_run()
    unit = pick_engine(instr, engine, {"vector", "gpsimd"}, "vector")
    checks.compute_operands(instr, unit, {}, {"dst": dst})
    if run.numerics:
        dst.write(np.full(dst.shape, value, dtype=np.float32 if dst.dtype.is_float else np.int64), run.precise)
    n = dst.free_size
    zero_16bit = value == 0 and dst.dtype.name in ("bfloat16", "float16")
    cycles = costs.gpsimd(n) if unit == "gpsimd" else costs.memset(n, zero_16bit)
    issue(run, unit, instr, cycles, reads=[], writes=[dst])


def vector_unary(dst, data, fn, opcode, raw_bits=False):
    """Vector-engine element-wise functions that have no nisa instruction of their own (nl.floor, ...)."""
    run = current_run()
    checks.compute_operands(opcode, "vector", {"data": data}, {"dst": dst})
    checks.same_layout(opcode, "dst", dst, "data", data)
    if run.numerics:
        if raw_bits:
            checks.integer_dtype(opcode, "data", data)
        dst.write(fn(as_matrix(run, data, fp32=not raw_bits)), run.precise)
    issue(run, "vector", opcode, costs.vector_single_input(data.free_size), reads=[data], writes=[dst])


def select(dst, predicate, on_true, on_false):
    """dst = on_true where predicate != 0 else on_false (Vector engine; on_false may be a number)."""
    op = "select"
    run = current_run()
    false_tile = on_false if not isinstance(on_false, (int, float, np.number)) else None
    checks.compute_operands(op, "vector", {"predicate": predicate, "on_true": on_true, "on_false": false_tile},
                            {"dst": dst})
    checks.same_layout(op, "predicate", predicate, "on_true", on_true)
    checks.same_layout(op, "dst", dst, "on_true", on_true)
    if false_tile is not None:
        checks.same_layout(op, "on_false", false_tile, "on_true", on_true)
    if run.numerics:
        other = as_matrix(run, false_tile) if false_tile is not None else np.float32(on_false)
        dst.write(np.where(as_matrix(run, predicate) != 0, as_matrix(run, on_true), other), run.precise)
    n = on_true.free_size
    issue(run, "vector", op, costs.vector_tensor_tensor(n, False, False), reads=[predicate, on_true, false_tile],
          writes=[dst])
