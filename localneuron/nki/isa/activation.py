"""ScalarE activation (with its accumulator reduction) and the gen4 Vector exponential."""
import numpy as np

from .. import alu, checks
from ..activations import ActivationFunction
from ..cycle_model import costs
from ..errors import NkiUsageError, require
from ..run import current_run
from .common import as_matrix, issue, operand, operand_values
from .constants import reduce_cmd as reduce_cmds


def _accumulate(run, lanes, partial, command, reduce_res):
    """Apply reduce_cmd to the per-lane accumulator registers; return what reduce_res receives."""
    regs = run.scalar_accumulators
    if command in (reduce_cmds.reset, reduce_cmds.reset_reduce):
        regs[lanes] = 0.0
    if command is reduce_cmds.load_reduce:
        regs[lanes] = reduce_res.read_fp32().ravel()
    if command in (reduce_cmds.reduce, reduce_cmds.reset_reduce, reduce_cmds.load_reduce):
        regs[lanes] += partial
    elif command is reduce_cmds.idle and partial is not None:
        return partial  # no register involvement: the reduction of this instruction alone
    return regs[lanes].copy()


def _reduce_res(op, reduce_res, partitions):
    if reduce_res is not None:
        checks.per_partition_vector(op, "reduce_res", reduce_res, partitions)
        checks.float_dtype(op, "reduce_res", reduce_res)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmds.idle, name=None):
    """dst = op(data * scale + bias); optionally sum the result along the free axis per partition."""
    instr = "activation"
    run = current_run()
    if not isinstance(op, ActivationFunction):
        raise NkiUsageError(f"{instr}: op={op!r} is not an activation function (e.g. nl.exp, nl.relu, nl.copy)")
    p = data.num_partitions
    scale_value, scale_tile = operand(instr, "scale", scale, p)
    bias_tile = None
    if bias is not None:
        bias_value, bias_tile = operand(instr, "bias", bias, p)
        require(bias_tile is not None or run.target.has("scalar_bias_immediate") or bias_value == 0.0,
                f"{instr}: bias must be a [{p}, 1] tile on {run.target.name}; immediate (scalar) bias needs gen3 or newer")
    if reduce_res is not None or reduce_op is not None:
        require(reduce_op in (None, alu.add), f"{instr}: reduce_op must be nl.add, got {reduce_op!r}")
    _reduce_res(instr, reduce_res, p)
    checks.compute_operands(instr, "scalar", {"data": data, "bias": bias_tile, "scale": scale_tile},
                            {"dst": dst, "reduce_res": reduce_res})
    checks.same_layout(instr, "dst", dst, "data", data)
    reduces = reduce_res is not None or reduce_cmd is not reduce_cmds.idle
    if run.numerics:
        x = as_matrix(run, data) * operand_values(run, scale_value, p)
        if bias is not None:
            x = x + operand_values(run, bias_value, p)
        result = op.apply(x)
        dst.write(result, run.precise)
        if reduces:
            lanes = slice(data.partition_start, data.partition_start + p)
            partial = result.sum(axis=1, dtype=np.float32) if reduce_res is not None or reduce_cmd in (
                reduce_cmds.reduce, reduce_cmds.reset_reduce, reduce_cmds.load_reduce) else None
            total = _accumulate(run, lanes, partial, reduce_cmd, reduce_res)
            if reduce_res is not None:
                reduce_res.write(total.reshape(p, 1), run.precise)
    cycles = costs.activation(data.free_size, reads_accumulator=reduce_res is not None)
    issue(run, "scalar", instr, cycles, reads=[data, bias_tile, scale_tile], writes=[dst, reduce_res])


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """Older spelling of activation(..., reduce_cmd=reset_reduce)."""
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
               reduce_cmd=reduce_cmds.reset_reduce)


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmds.idle, reduce_init=0.0, name=None):
    """gen4 Vector engine: dst = exp(src - max_value), optionally reduce_res = reduce_init + row sums."""
    instr = "exponential"
    run = current_run()
    require(run.target.has("exponential"),
            f"{instr}: nisa.exponential needs gen4 (NeuronCore-v4); target is {run.target.name}")
    p = src.num_partitions
    max_scalar, max_tile = operand(instr, "max_value", max_value, p)
    _reduce_res(instr, reduce_res, p)
    checks.compute_operands(instr, "vector", {"src": src, "max_value": max_tile}, {"dst": dst, "reduce_res": reduce_res})
    checks.same_layout(instr, "dst", dst, "src", src)
    if run.numerics:
        with np.errstate(all="ignore"):
            result = np.exp(as_matrix(run, src) - operand_values(run, max_scalar, p)).astype(np.float32)
        dst.write(result, run.precise)
        if reduce_res is not None:
            reduce_res.write((np.float32(reduce_init) + result.sum(axis=1, dtype=np.float32)).reshape(p, 1), run.precise)
    cycles = costs.exponential(src.free_size, reads_accumulator=reduce_res is not None)
    issue(run, "vector", instr, cycles, reads=[src, max_tile], writes=[dst, reduce_res])
