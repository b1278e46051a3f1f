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

# op -> why its output shape depends on a float or string argument (the signature ignores their values)
SHAPE_FROM_FLOAT_OR_STRING = {
    "aten::arange": "the float start/end/step set the length",
    "aten::range": "the float start/end/step set the length",
    "aten::linspace": "float end points with a tensor step count",
    "aten::logspace": "float end points with a tensor step count",
    "aten::upsample_nearest1d": "float scale factors may set the output size",
    "aten::upsample_nearest2d": "float scale factors may set the output size",
    "aten::upsample_nearest3d": "float scale factors may set the output size",
    "aten::upsample_linear1d": "float scale factors may set the output size",
    "aten::upsample_bilinear2d": "float scale factors may set the output size",
    "aten::upsample_trilinear3d": "float scale factors may set the output size",
    "aten::einsum": "the equation string sets the output dimensions",
}


# op -> why the values of its Scalar arguments set its output shape. The signature keeps their values
# (csrc/executor/signature.h; other ops' Scalars count by kind only, so clamp(x, min=i) is one executable for
# every i), so with ints alone their calls are queued with the right shape.
SHAPE_FROM_SCALARS = {
    "aten::arange": "start, end and step set the length",
    "aten::range": "start, end and step set the length",
}


# op -> why its int results follow from its signature (a queued op's results are fixed on its first call)
INT_RESULTS_FROM_SHAPES = {
    "aten::_scaled_dot_product_fused_attention_overrideable": "max_q and max_k are the sequence lengths",
}


# op -> why it draws no random numbers although tagged nondeterministic_seeded (such ops run when issued)
SEEDED_TAG_WITHOUT_DRAWS = {
    "aten::_scaled_dot_product_fused_attention_overrideable":
        "dropout only; its host kernel (csrc/aten/attention.cpp, CPU flash attention) refuses dropout_p > 0",
}


# CPU fallbacks queued like device ops: the device's memory is the host's, so their host kernel can run on
# the worker, on aliases of the device tensors, and compute what TorchNeuron's copies in and out would. Each
# is functional, has static shapes and raises only for its signature (its first call runs when issued), so
# no error moves from the call to the next synchronisation point. It is still a CPU fallback for the user:
# warned, counted per call, listed by get_fallback_ops(), costed with its transfers; its call site is
# recorded at the first call of each signature. op -> why it is worth queuing
QUEUED_FALLBACKS = {
    "aten::select_backward": "the backward of x[i] (nn.MultiheadAttention's packed projection: 3 per layer "
                             "per step); waiting for the queue there stalls every training step",
    "aten::upsample_bilinear2d": "interpolation in every step of diffusion U-Nets",
    "aten::upsample_bilinear2d_backward": "its backward",
    "aten::upsample_bicubic2d": "interpolation in image models",
    "aten::upsample_bicubic2d_backward": "its backward",
    "aten::_upsample_bilinear2d_aa": "antialiased interpolation in image preprocessing",
    "aten::_upsample_bilinear2d_aa_backward": "its backward",
    "aten::_upsample_bicubic2d_aa": "antialiased interpolation in image preprocessing",
    "aten::_upsample_bicubic2d_aa_backward": "its backward",
}


# Ops that change their argument's sizes, strides or storage in place (ATen tag inplace_view): Python reads
# the new shape as soon as the op returns, so the device tensor must change when the op is issued. Those
# that re-describe the same bytes run at once, as views do; these may reallocate, and run when the queue
# has drained.
REALLOCATING_INPLACE_VIEWS = {"aten::resize_", "aten::resize_as_", "aten::set_"}


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
