"""Vector-engine instructions beyond the element-wise family: reciprocal, scans, predicated copies,
range selection, batch-norm statistics, top-8 search and replace, partition reductions."""
import numpy as np

from .. import alu, checks
from ..cycle_model import costs
from ..errors import NkiUsageError, require
from ..run import current_run
from .common import as_matrix, issue, operand, operand_values
from .constants import reduce_cmd as reduce_cmds
from .elementwise import alu_op

TOP = 8   # max8 / nc_find_index8 / nc_match_replace8 work on 8 values per partition


def _unary(instr, dst, data, fn, engine="vector"):
    run = current_run()
    checks.compute_operands(instr, engine, {"data": data}, {"dst": dst})
    checks.same_layout(instr, "dst", dst, "data", data)
    if run.numerics:
        with np.errstate(all="ignore"):
            dst.write(fn(as_matrix(run, data)), run.precise)
    issue(run, engine, instr, costs.vector_single_input(data.free_size), reads=[data], writes=[dst])


def reciprocal(dst, data, name=None):
    """dst = 1 / data, element-wise on the Vector engine (exact fp32 division, unlike the ScalarE
    activation nl.reciprocal, whose approximation holds for |x| in [2^-42, 2^42])."""
    _unary("reciprocal", dst, data, lambda x: np.float32(1.0) / x)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """Per partition, along the free axis: dst[i] = (data0[i] op0 dst[i-1]) op1 data1[i], dst[-1] = initial
    (a number or a [P, 1] tile). With op0=multiply on ones and op1=add this is a cumulative sum."""
    instr = "tensor_tensor_scan"
    run = current_run()
    first, second = alu_op(instr, "op0", op0), alu_op(instr, "op1", op1)
    p = data0.num_partitions
    start_value, start_tile = operand(instr, "initial", initial, p)
    checks.compute_operands(instr, "vector", {"data0": data0, "data1": data1, "initial": start_tile}, {"dst": dst})
    checks.same_layout(instr, "data1", data1, "data0", data0)
    checks.same_layout(instr, "dst", dst, "data0", data0)
    if run.numerics:
        a, b = as_matrix(run, data0), as_matrix(run, data1)
        carry = np.broadcast_to(operand_values(run, start_value, p), (p, 1)).reshape(p).astype(np.float32)
        out = np.empty_like(a)
        with np.errstate(all="ignore"):
            for i in range(a.shape[1]):
                partial = first.apply(carry, a[:, i]) if reverse0 else first.apply(a[:, i], carry)
                carry = (second.apply(b[:, i], partial) if reverse1 else second.apply(partial, b[:, i])).astype(np.float32)
                out[:, i] = carry
        dst.write(out, run.precise)
    issue(run, "vector", instr, costs.vector_tensor_tensor(data0.free_size, False, False),
          reads=[data0, data1, start_tile], writes=[dst])


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """dst = src where predicate is non-zero (zero with reverse_pred=True); other elements keep their value."""
    instr = "tensor_copy_predicated"
    run = current_run()
    checks.compute_operands(instr, "vector", {"src": src, "predicate": predicate}, {"dst": dst})
    checks.same_layout(instr, "dst", dst, "src", src)
    checks.same_layout(instr, "predicate", predicate, "src", src)
    if run.numerics:
        keep = as_matrix(run, predicate, fp32=False) != 0
        if reverse_pred:
            keep = ~keep
        current = as_matrix(run, dst, fp32=not dst.dtype.is_int)
        new = as_matrix(run, src, fp32=not src.dtype.is_int)
        dst.write(np.where(keep, new, current), run.precise)
    issue(run, "vector", instr, costs.vector_tensor_tensor(src.free_size, False, False),
          reads=[src, predicate, dst], writes=[dst])


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, on_false_value, reduce_cmd=reduce_cmds.idle,
                 reduce_res=None, reduce_op=alu.maximum, range_start=0, name=None):
    """dst[p, j] = on_true_tile[p, j] where comp_op0(range_start + j, bound0[p]) and comp_op1(range_start + j,
    bound1[p]) hold, else on_false_value; optionally reduce_res[p] = reduce_op over dst[p, :] (masking
    the positions outside a per-row range, as attention with sequence packing does)."""
    instr = "range_select"
    run = current_run()
    p = on_true_tile.num_partitions
    for param, op in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        require(isinstance(op, alu.AluOp) and op.kind == "compare",
                f"{instr}: {param} must be a comparison such as nl.greater_equal, got {op!r}")
    low_value, low_tile = operand(instr, "bound0", bound0, p)
    high_value, high_tile = operand(instr, "bound1", bound1, p)
    checks.compute_operands(instr, "vector", {"on_true_tile": on_true_tile, "bound0": low_tile, "bound1": high_tile},
                            {"dst": dst, "reduce_res": reduce_res})
    checks.same_layout(instr, "dst", dst, "on_true_tile", on_true_tile)
    if reduce_res is not None:
        checks.per_partition_vector(instr, "reduce_res", reduce_res, p)
        require(reduce_op in (alu.maximum, alu.minimum, alu.add),
                f"{instr}: reduce_op must be nl.maximum, nl.minimum or nl.add, got {reduce_op!r}")
    if run.numerics:
        index = (np.float32(range_start) + np.arange(on_true_tile.free_size, dtype=np.float32))[None, :]
        keep = (comp_op0.apply(index, operand_values(run, low_value, p)) != 0) & \
               (comp_op1.apply(index, operand_values(run, high_value, p)) != 0)
        result = np.where(keep, as_matrix(run, on_true_tile), np.float32(on_false_value)).astype(np.float32)
        dst.write(result, run.precise)
        if reduce_res is not None:
            reduced = alu.REDUCTIONS[reduce_op](result, axis=1)
            registers = run.scalar_accumulators
            lanes = slice(on_true_tile.partition_start, on_true_tile.partition_start + p)
            if reduce_cmd in (reduce_cmds.reduce, reduce_cmds.load_reduce):
                previous = registers[lanes] if reduce_cmd is reduce_cmds.reduce else reduce_res.read_fp32().ravel()
                reduced = alu.REDUCTIONS[reduce_op](np.stack([previous, reduced]), axis=0)
            registers[lanes] = reduced
            reduce_res.write(reduced.reshape(p, 1), run.precise)
    issue(run, "vector", instr, costs.vector_single_input(on_true_tile.free_size),
          reads=[on_true_tile, low_tile, high_tile], writes=[dst, reduce_res])


BN_STATS_FMAX = 512


def bn_stats(dst, data, name=None):
    """Per partition: (count, mean, variance * count) of the even-indexed elements, then of the odd ones."""
    instr = "bn_stats"
    run = current_run()
    checks.compute_operands(instr, "vector", {"data": data}, {"dst": dst})
    checks.same_partitions(instr, "dst", dst, "data", data)
    require(data.free_size <= BN_STATS_FMAX,
            f"{instr}: data has {data.free_size} elements per partition; at most {BN_STATS_FMAX} "
            f"(nl.tile_size.bn_stats_fmax): split the tile and aggregate the outputs with one bn_aggr")
    require(dst.free_size == 6, f"{instr}: dst must have 6 elements per partition, got {dst.free_size}")
    if run.numerics:
        x = as_matrix(run, data)
        columns = []
        for half in (x[:, 0::2], x[:, 1::2]):
            count = half.shape[1]
            mean = half.mean(axis=1) if count else np.zeros(x.shape[0], np.float32)
            m2 = ((half - mean[:, None]) ** 2).sum(axis=1) if count else np.zeros(x.shape[0], np.float32)
            columns += [np.full(x.shape[0], count, np.float32), mean, m2]
        dst.write(np.stack(columns, axis=1), run.precise)
    issue(run, "vector", instr, costs.vector_single_input(data.free_size), reads=[data], writes=[dst])


def bn_aggr(dst, data, name=None):
    """Combine (count, mean, variance * count) triples per partition into (mean, variance)."""
    instr = "bn_aggr"
    run = current_run()
    checks.compute_operands(instr, "vector", {"data": data}, {"dst": dst})
    checks.same_partitions(instr, "dst", dst, "data", data)
    require(data.free_size % 3 == 0, f"{instr}: data must hold (count, mean, variance*count) triples, "
                                     f"got {data.free_size} elements per partition")
    require(dst.free_size == 2, f"{instr}: dst must have 2 elements per partition (mean, variance)")
    if run.numerics:
        triples = as_matrix(run, data).reshape(data.num_partitions, -1, 3).astype(np.float64)
        count, mean, m2 = triples[..., 0], triples[..., 1], triples[..., 2]
        total = count.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        grand = (count * mean).sum(axis=1) / safe
        variance = (m2 + count * (mean - grand[:, None]) ** 2).sum(axis=1) / safe
        dst.write(np.stack([grand, variance], axis=1).astype(np.float32), run.precise)
    issue(run, "vector", instr, costs.vector_single_input(data.free_size), reads=[data], writes=[dst])


def _top8_operands(instr, run, dst, data):
    checks.compute_operands(instr, "vector", {"data": data}, {"dst": dst})
    checks.same_partitions(instr, "dst", dst, "data", data)
    require(dst.free_size == TOP, f"{instr}: dst must have {TOP} elements per partition, got {dst.free_size}")
    require(data.free_size >= TOP, f"{instr}: data needs at least {TOP} elements per partition, got {data.free_size}")


def max8(dst, src, name=None):
    """The 8 largest values of each partition, largest first."""
    instr = "max8"
    run = current_run()
    _top8_operands(instr, run, dst, src)
    if run.numerics:
        values = as_matrix(run, src)
        dst.write(-np.sort(-values, axis=1, kind="stable")[:, :TOP], run.precise)
    issue(run, "vector", instr, costs.vector_single_input(src.free_size), reads=[src], writes=[dst])


def _first_matches(values, targets):
    """Index of the first element equal to each target (each element matched once, in target order);
    the hardware's result for a value that is absent: index -1 as unsigned (all ones)."""
    indices = np.full(targets.shape, -1, dtype=np.int64)
    for row in range(values.shape[0]):
        used = np.zeros(values.shape[1], dtype=bool)
        for k, target in enumerate(targets[row]):
            hits = np.flatnonzero((values[row] == target) & ~used)
            if hits.size:
                indices[row, k] = hits[0]
                used[hits[0]] = True
    return indices


def nc_find_index8(dst, data, vals, name=None):
    """For each of the 8 values per partition in `vals`, the index of its first occurrence in `data`."""
    instr = "nc_find_index8"
    run = current_run()
    _top8_operands(instr, run, dst, data)
    checks.same_partitions(instr, "vals", vals, "data", data)
    require(vals.free_size == TOP, f"{instr}: vals must have {TOP} elements per partition, got {vals.free_size}")
    require(dst.dtype.is_int, f"{instr}: dst holds indices; its dtype must be an integer type, got {dst.dtype}")
    if run.numerics:
        found = _first_matches(as_matrix(run, data), as_matrix(run, vals))
        dst.write(found.astype(np.int64) & 0xFFFFFFFF if dst.dtype.name == "uint32" else found, run.precise)
    issue(run, "vector", instr, costs.vector_single_input(data.free_size), reads=[data, vals], writes=[dst])


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with the first occurrence of each of the 8 values per partition in `vals` replaced by
    `imm`; dst_idx (optional) receives their indices."""
    instr = "nc_match_replace8"
    run = current_run()
    _top8_operands(instr, run, vals, data)
    checks.compute_operands(instr, "vector", {"data": data, "vals": vals}, {"dst": dst, "dst_idx": dst_idx})
    checks.same_layout(instr, "dst", dst, "data", data)
    if dst_idx is not None:
        require(dst_idx.free_size == TOP and dst_idx.dtype.is_int,
                f"{instr}: dst_idx must be an integer tile with {TOP} elements per partition")
    if run.numerics:
        values = as_matrix(run, data)
        found = _first_matches(values, as_matrix(run, vals))
        replaced = values.copy()
        rows = np.repeat(np.arange(values.shape[0]), TOP).reshape(found.shape)
        present = found >= 0
        replaced[rows[present], found[present]] = np.float32(imm)
        dst.write(replaced, run.precise)
        if dst_idx is not None:
            dst_idx.write(found & 0xFFFFFFFF if dst_idx.dtype.name == "uint32" else found, run.precise)
    issue(run, "vector", instr, costs.vector_single_input(data.free_size), reads=[data, vals],
          writes=[dst, dst_idx])


def tensor_partition_reduce(dst, op, data, name=None):
    """Reduce across partitions: dst[0, j] = op over data[:, j] (GpSimd, which reaches every partition)."""
    instr = "tensor_partition_reduce"
    run = current_run()
    if op not in alu.REDUCTIONS:
        raise NkiUsageError(f"{instr}: op={op!r} cannot reduce; use one of {', '.join(map(repr, alu.REDUCTIONS))}")
    checks.compute_operands(instr, "gpsimd", {"data": data}, {"dst": dst})
    require(dst.num_partitions == 1 and dst.free_size == data.free_size,
            f"{instr}: dst must be [1, {data.free_size}] (data reduced over its {data.num_partitions} partitions), "
            f"got {list(dst.shape)}")
    if run.numerics:
        values = as_matrix(run, data, fp32=op.kind != "bitvec")
        dst.write(alu.REDUCTIONS[op](values, axis=0).reshape(1, -1), run.precise)
    issue(run, "gpsimd", instr, costs.gpsimd(data.free_size * data.num_partitions // 8 + data.free_size),
          reads=[data], writes=[dst])


QUADRANT = 32


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """Move partitions within each 32-partition quadrant: dst partition 32q + i receives src partition
    32q + shuffle_mask[i] (255 leaves it unchanged). A src of at most 32 partitions feeds every quadrant."""
    instr = "nc_stream_shuffle"
    run = current_run()
    mask = [int(m) for m in shuffle_mask]
    checks.compute_operands(instr, "vector", {"src": src}, {"dst": dst})
    checks.same_free_size(instr, "dst", dst, "src", src)
    require(len(mask) == min(QUADRANT, max(dst.num_partitions, len(mask))) and len(mask) <= QUADRANT,
            f"{instr}: shuffle_mask has {len(mask)} entries; it needs one per partition of a quadrant (at most "
            f"{QUADRANT})")
    sources = []
    for i in range(dst.num_partitions):
        m = mask[i % len(mask)]
        base = (i // QUADRANT) * QUADRANT if src.num_partitions > QUADRANT else 0
        require(m == 255 or base + m < src.num_partitions,
                f"{instr}: shuffle_mask[{i % len(mask)}]={m} names no partition of the "
                f"{src.num_partitions}-partition src")
        sources.append(None if m == 255 else base + m)
    if run.numerics:
        source = as_matrix(run, src, fp32=not src.dtype.is_int)
        result = as_matrix(run, dst, fp32=not dst.dtype.is_int).copy()
        for i, s in enumerate(sources):
            if s is not None:
                result[i] = source[s]
        dst.write(result, run.precise)
    issue(run, "vector", instr, costs.vector_single_input(src.free_size), reads=[src], writes=[dst])
