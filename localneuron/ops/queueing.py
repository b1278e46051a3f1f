"""Which executables may run on the device queue (asynchronously) and which must run when issued.

A queued op hands Python its results before it runs, so its output shapes must follow from its
signature alone (csrc/queue/queued_ops.h learns them from the first call). Everything else runs after the
device's queue has drained: CPU fallbacks (except those below) and the float64 route (Python reads device
data), ops whose
output shapes depend on the data (their meta kernel cannot say), out= variants (they may resize their
outputs), ops drawing from a generator, passed or the default one (the caller observes its state and
seeds it between calls), and ops with non-tensor results (except ints listed below). Views read no
data: they run at once, without waiting for the queue.
"""
import torch

from localneuron._C import Execution, Route
from localneuron.ops import arguments
from localneuron.ops.op_records import names_with

# Each set below is op -> why, derived from the op records (op_records.py documents each field).

# ops whose output shape depends on a float or string argument (the signature ignores their values)
SHAPE_FROM_FLOAT_OR_STRING = names_with("shape_from_float_or_string")

# ops whose Scalar values set their output shape. The signature keeps their values (csrc/executor/signature.h;
# other ops' Scalars count by kind only, so clamp(x, min=i) is one executable for every i), so with ints alone
# their calls are queued with the right shape.
SHAPE_FROM_SCALARS = names_with("shape_from_scalars")

# ops whose int results follow from their signature (a queued op's results are fixed on its first call)
INT_RESULTS_FROM_SHAPES = names_with("int_results_from_shapes")

# ops that draw no random numbers although tagged nondeterministic_seeded (such ops run when issued)
SEEDED_TAG_WITHOUT_DRAWS = names_with("seeded_without_draws")

# CPU fallbacks queued like device ops: the device's memory is the host's, so their host kernel can run on
# the worker, on aliases of the device tensors, and compute what TorchNeuron's copies in and out would. Each
# is functional, has static shapes and raises only for its signature (its first call runs when issued), so
# no error moves from the call to the next synchronisation point. It is still a CPU fallback for the user:
# warned, counted per call, listed by get_fallback_ops(), costed with its transfers; its call site is
# recorded at the first call of each signature. op -> why it is worth queuing
QUEUED_FALLBACKS = names_with("queued_fallback")

# Ops that change their argument's sizes, strides or storage in place (ATen tag inplace_view): Python reads
# the new shape as soon as the op returns, so the device tensor must change when the op is issued. Those
# that re-describe the same bytes run at once, as views do; these may reallocate, and run when the queue
# has drained.
REALLOCATING_INPLACE_VIEWS = frozenset(names_with("reallocating_inplace_view"))


def execution_of(op, route, is_view: bool, args, kwargs, static_shapes: bool) -> Execution:
    """static_shapes: whether the op's meta kernel gave its outputs (arguments.run_on_meta): it cannot for ops
    whose output shapes depend on the data."""
    if torch.Tag.inplace_view in op.tags:
        return Execution.SYNCHRONOUS if op._schema.name in REALLOCATING_INPLACE_VIEWS else Execution.METADATA
    if is_view:
        return Execution.METADATA
    schema = op._schema
    if route == Route.PYTHON or not _queueable_schema(schema):
        return Execution.SYNCHRONOUS
    if torch.Tag.nondeterministic_seeded in op.tags and schema.name not in SEEDED_TAG_WITHOUT_DRAWS:
        return Execution.SYNCHRONOUS  # draws from a default generator (native_dropout has no generator argument)
    if schema.name in SHAPE_FROM_FLOAT_OR_STRING and _has_float_or_string(args, kwargs):
        return Execution.SYNCHRONOUS  # with ints alone (arange(start, end) in generate loops) the key fixes the shape
    return Execution.QUEUED if static_shapes else Execution.SYNCHRONOUS


def _queueable_schema(schema) -> bool:
    result_types = [torch.TensorType.get(), torch.ListType(torch.TensorType.get()),
                    torch.OptionalType(torch.TensorType.get())]
    if schema.name in INT_RESULTS_FROM_SHAPES:
        result_types += [torch.IntType.get(), torch.SymIntType.get()]
    if arguments.generator_argument_names(schema):
        return False
    if any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return False  # out=
    return all(r.type in result_types and (r.alias_info is None or r.alias_info.is_write) for r in schema.returns)


def _has_float_or_string(args, kwargs) -> bool:
    def float_or_string(v) -> bool:
        if isinstance(v, (list, tuple)):
            return any(float_or_string(e) for e in v)
        return isinstance(v, (float, complex, str))
    return any(float_or_string(v) for v in (*args, *kwargs.values()))
