"""One record per ATen op: everything the device decides about an op, in one table (OpInfo style).

Key: "aten::name" (every overload) or "aten::name.overload" (that overload only); c10d's collectives, dispatcher
ops too, are keyed "c10d::name" and "_c10d_functional::name". An op without a record is native, run through
PyTorch's dispatch, and reported as "not confirmed by the support table".

    support   TorchNeuron's rule from its support table: NATIVE or CPU_FALLBACK (source: torch-neuronx
              snapshot 2026-04-21 python_ops/torch_mlir/ops/*.py, python_ops/__init__.py,
              python_ops/{copy,to_copy,grouped_mm}.py, python_ops/cpu_fallback_registrations.py,
              csrc/aten/{NeuronNativeFunctions,TensorShape}.cpp, docs/ops.html). In-place variants (add_)
              share the rule of their functional op (add) when they have no record of their own.
    fallback_dtypes  dtypes a NATIVE op does not cover, run as CPU fallback (only where the source says so)
    run       WHOLE: the executor runs the composite op whole instead of its device decomposition (out=
              overloads keep their kernels); WHOLE_INCLUDING_OUT: every overload, out= included (TorchNeuron
              registers the out= overload too, or the composite code checks the device type); OUT_KERNEL (an
              in-place form of a structured op): it runs its out= overload writing into its argument, as
              TorchNeuron does, instead of whole (tracked under the out= overload);
              decompose(fn): the device runs fn (decompositions.py) instead of a CUDA-only kernel;
              on_host(fn): the device runs the op as one executable, tracked under its name, whose kernel is fn
              (decompositions.py) on host copies of its arguments (results written back as a fallback's): a
              CUDA-only op TorchNeuron implements as one op
    index_args_64bit_exempt  its int64 tensors are indices, used directly instead of computed in int32
    quirk     the CPU kernel differs from an accelerator for some signatures; the fix runs instead
              (host_kernel_fixes.py)
    unsupported  the error for a feature Neuron does not have (features.py)
    writes    arguments the op updates although its schema does not mark them written
    overwrites  the arguments it writes take values that do not depend on what they held (a copy's
              destination, a fill's target): estimate/trace.py does not count them as read
    cost      the cost model's rule for its engine work (localneuron/costmodel/engines.py holds the
              formulas; this table is handed down to it): Matmul, Attention, Rows, Elementwise,
              REDUCTION, MOVEMENT, FREE; none: element-wise VectorE work
  Queueing (ops/queueing.py reads these; each value is the reason):
    shape_from_float_or_string  why its output shape depends on a float or string argument (the signature
              ignores their values): such a call runs when issued; with ints alone it is queued
    shape_from_scalars  why the values of its Scalar arguments set its output shape: they are handed to C++ at
              registration and join its signature (csrc/executor/signature.h)
    int_results_from_shapes  why its int results follow from its signature (a queued op's results are fixed on
              its first call), so it may be queued although it returns ints
    seeded_without_draws  why it draws no random numbers although tagged nondeterministic_seeded (such ops run
              when issued)
    queued_fallback  why this CPU fallback is worth queuing like a device op (queueing.py says when that is
              safe); it stays a CPU fallback for the user
    reallocating_inplace_view  an inplace_view op that may reallocate its argument's storage: it runs when the
              queue has drained (other inplace_view ops run at once, as views do)
  Execution (adaptive_eager/, estimate/ and csrc/ read these; C++ receives its lists at registration):
    fusible   the overloads Adaptive Eager may fuse, each a Fuse(overload, dtypes, only_with, why): dtypes ANY,
              FLOAT32 or NUMBERS_FLOAT32, only_with (argument, value) the one value of an argument the
              generated code reproduces bit for bit (adaptive_eager/fusible_ops.py says what the rules mean and
              which ops are left out on purpose)
    issued    what the device issues for it run eagerly, where that is not an executable of its own (its kernels
              in csrc/aten/kernels.cpp, or PyTorch's composite kernel when the device has none): COPY, a
              conversion or a copy between device tensors, one copy within HBM (_copy_from), priced by the
              destination's bytes as costmodel/work.price_copy does; NOTHING, an allocation, or _unsafe_view, whose
              composite kernel is a view; an in-place op's name, the executable the device runs on its output
              (ZEROED, FILLED: a creation op's composite kernel allocates, then runs zero_ or fill_ on the result);
              unset: its executable (costmodel/ops.py EXECUTABLE). estimate/trace.py reads it for the op-by-op sum
              (costmodel/ops.eager_issues); tests/profiler/test_price_once.py checks each against what the device
              issues
    matmul_segment  why it joins an Adaptive Eager run as a matmul (TORCH_NEURONX_ENABLE_CONCATENATION=1): it closes
              the run's segment and runs with its own kernel (csrc/fusion/fusion.cpp run_matmul_segment;
              adaptive_eager/fusible_ops.py)
    fast      Fast(form, overload, out): the overload has an unboxed entry point in C++
              (csrc/executor/fast_ops.cpp), whose argument list is `form` (UNARY, TENSOR_SCALAR, BINARY,
              BINARY_ALPHA; in place: BINARY_IN_PLACE, BINARY_ALPHA_IN_PLACE) and whose queued runs call the `out`
              overload (an in-place form: the op itself, on its first argument); chosen by their call counts in
              the Llama and transformer steps of benchmarks/eager_overhead.py (in place: the optimizer's and
              residual updates)
  Estimate (localneuron/estimate/script.py reads these):
    healthy_read  what a healthy run reads from its output, the rule `estimate --script` answers a host read of a
              device value with (its tensors are fake, so a script's `if not torch.isfinite(loss)` or
              `loss.item()` is given what a run without overflow would give): READS_TRUE, READS_FALSE (isfinite
              is true, isnan false: values are finite); READS_EQUAL_TO_ITSELF, READS_UNEQUAL_TO_ITSELF (x == x
              is true, x == inf false); READS_NEGATED, READS_BOTH, READS_EITHER, READS_EXACTLY_ONE (logic on
              its operands' healthy values); READS_ITS_INPUT (a reduction, copy or view of values that are all
              the same is that value); READS_SELECTED (where: the operand its condition picks). An output whose
              rule gives nothing is read as 0 / False
    collective  Collective(kind, counted): a c10d or functional collective, which `estimate --script` prices by
              its kind (costmodel/collectives.py) on the bytes of its inputs (INPUTS) or outputs (OUTPUTS)
    collective_result  why its output is its input once the collective that made the input has completed (a
              functional collective's wait, its autograd wrapper): `estimate --script` returns the input as it is
    lowering_error  the check of TorchNeuron's lowering whose error differs from PyTorch's for a call of this op
              (ops/lowering_errors.py): run at the call, before anything is cached or queued
    kernel_error  the rule for a value check of this op's kernel whose error TorchNeuron raises with another type than
              PyTorch's (ops/lowering_errors.py): (error type name, message) -> the class to raise it as, or None;
              applied at the call (policy.on_device_failure) and at the synchronisation point that raises it held
              (csrc/queue/held_errors.cpp)
    tracked_as  the name TorchNeuron's trackers list its calls under, where the device runs it whole under another:
              the overload of TorchNeuron's own kernel, which its composite kernel calls (ops/tracking.py tracked_name)
    why       the reason, where the entry is special
"""
from dataclasses import dataclass
from typing import Callable

from localneuron.costmodel.engines import (
    CONVERSION, FREE, MOVEMENT, REDUCTION, Attention, Elementwise, Matmul, Rows, use_rules,
)
from localneuron.costmodel.ops import COPY, NOTHING
from localneuron.ops.decompositions import (
    addmm_dtype, baddbmm_dtype, batch_norm_backward_elemt, batch_norm_backward_reduce, batch_norm_elemt,
    batch_norm_gather_stats, batch_norm_gather_stats_with_counts, batch_norm_stats, bmm_dtype,
    efficient_attention_backward, efficient_attention_forward, flash_attention_backward, flash_attention_forward,
    fused_gru_cell, fused_gru_cell_backward, fused_lstm_cell, fused_lstm_cell_backward_impl, fused_rms_norm_backward,
    lazy_clone, mm_dtype, rms_norm, saturate_weight_to_fp16,
)
from localneuron.ops import lowering_errors
from localneuron.ops.features import MKLDNN, NESTED, QUANTIZED, SPARSE, TRANSFORMER_FAST_PATH
from localneuron.ops.host_kernel_fixes import (
    BATCH_NORM, BATCH_NORM_BACKWARD, CONVOLUTION_BACKWARD, FUSED_SGD, GRID_SAMPLER, HISTC, LOGIT_BACKWARD,
    NATIVE_MULTI_HEAD_ATTENTION, ORTHOGONAL_POLYNOMIAL, OUT_OF_ANOTHER_DTYPE, SOFTMAX_BACKWARD_TO_HALF,
    SOFTMAX_HALF_TO_FLOAT, HostKernelFix,
)

NATIVE = "native"
CPU_FALLBACK = "cpu_fallback"
WHOLE = "whole"
WHOLE_INCLUDING_OUT = "whole, out= included"
OUT_KERNEL = "its out= kernel"


@dataclass(frozen=True)
class Decompose:
    fn: Callable
    autograd: bool = False  # a CompositeImplicitAutograd op: its decomposition also serves autograd
    # registered on the device's backend key too; False for a CompositeImplicitAutograd op TorchNeuron leaves
    # unregistered there (its test_autograd_chains forbids such registrations): the autograd key only
    backend: bool = True

    @property
    def keys(self) -> tuple:
        """The dispatch keys the decomposition is the device's kernel for."""
        return ("PrivateUse1",) * self.backend + ("AutogradPrivateUse1",) * self.autograd

    def __str__(self) -> str:
        return f"decompose({self.fn.__name__})"


def decompose(fn: Callable, autograd: bool = False, backend: bool = True) -> Decompose:
    if not (autograd or backend):
        raise ValueError("a decomposition registered on no key")
    return Decompose(fn, autograd, backend)


@dataclass(frozen=True)
class OnHost:
    fn: Callable

    def __str__(self) -> str:
        return f"on_host({self.fn.__name__})"


def on_host(fn: Callable) -> OnHost:
    return OnHost(fn)


# Adaptive Eager's dtype rules (Fuse.dtypes): adaptive_eager/fusible_ops.py says what each means
ANY, FLOAT32, NUMBERS_FLOAT32 = "any", "float32", "numbers float32"
# the unboxed entry points' argument lists (Fast.form), parsed by csrc/executor/fast_ops.cpp
UNARY, TENSOR_SCALAR, BINARY, BINARY_ALPHA = "unary", "tensor_scalar", "binary", "binary_alpha"
BINARY_IN_PLACE, BINARY_ALPHA_IN_PLACE = "binary_in_place", "binary_alpha_in_place"  # self, other[, alpha]


@dataclass(frozen=True)
class Fuse:
    overload: str          # "" for the default overload
    dtypes: str            # ANY, FLOAT32 or NUMBERS_FLOAT32
    only_with: tuple = ()  # (argument, value): a run with a call passing another value runs unfused
    why: str = ""

    def __str__(self) -> str:
        only = f" if {self.only_with[0]}={self.only_with[1]}" if self.only_with else ""
        return f"{self.overload or 'default'}({self.dtypes}{only})"


@dataclass(frozen=True)
class Fast:
    form: str              # UNARY, TENSOR_SCALAR, BINARY, BINARY_ALPHA, BINARY_IN_PLACE or BINARY_ALPHA_IN_PLACE
    overload: str = ""     # "" for the default overload
    out: str = "out"       # the out= overload of the same arguments (an in-place form: the overload itself)

    def __str__(self) -> str:
        return f"{self.overload or 'default'}({self.form}, out={self.out})"


# what a healthy run reads from an op's output (Record.healthy_read; estimate/script.py gives each its rule)
READS_TRUE, READS_FALSE = "true", "false"
READS_EQUAL_TO_ITSELF, READS_UNEQUAL_TO_ITSELF = "equal to itself", "unequal to itself"
READS_NEGATED, READS_BOTH, READS_EITHER, READS_EXACTLY_ONE = "negated", "both", "either", "exactly one"
READS_ITS_INPUT, READS_SELECTED = "its input's", "the selected operand's"
# which operands' bytes a collective moves (Collective.counted)
INPUTS, OUTPUTS = "in", "out"


@dataclass(frozen=True)
class Collective:
    kind: str     # as costmodel/collectives.py prices it: all_reduce, all_gather, reduce_scatter, broadcast...
    counted: str  # INPUTS or OUTPUTS

    def __str__(self) -> str:
        return f"{self.kind}(bytes of its {'inputs' if self.counted == INPUTS else 'outputs'})"


@dataclass(frozen=True)
class Record:
    support: str | None = None
    fallback_dtypes: tuple[str, ...] = ()
    run: str | Decompose | None = None
    index_args_64bit_exempt: bool = False
    quirk: HostKernelFix | None = None
    unsupported: str | None = None
    writes: tuple[str, ...] = ()
    overwrites: bool = False
    cost: object = None
    shape_from_float_or_string: str = ""
    shape_from_scalars: str = ""
    int_results_from_shapes: str = ""
    seeded_without_draws: str = ""
    queued_fallback: str = ""
    reallocating_inplace_view: bool = False
    fusible: tuple[Fuse, ...] = ()
    matmul_segment: str = ""
    fast: Fast | None = None
    issued: str = ""
    healthy_read: str = ""
    collective: Collective | None = None
    collective_result: str = ""
    lowering_error: Callable | None = None
    kernel_error: Callable | None = None
    tracked_as: str = ""
    why: str = ""


# reasons shared by many records
RNG = "RNG: no device RNG, no Neuron kernel in the snapshot"
HOST_ROUTED = "explicitly routed to the host (cpu_fallback_registrations.py)"
NO_KERNEL_UNIMPLEMENTED = "no Neuron kernel in the snapshot; unimplemented in docs/ops.html"
DOCS_ONLY = "marked implemented only in docs/ops.html"
FOREACH = "optimizers: one op per parameter list instead of one per tensor"
CELL = "CUDA-only fused RNN cell; aten::lstm / aten::gru pick it for any non-CPU input"
ATTENTION = "CUDA-only attention kernel, reached by direct calls"
SYNC_BATCH_NORM = "CUDA-only kernel that nn.SyncBatchNorm calls on any accelerator; TorchNeuron runs it as one op"
OUT_DTYPE = "the out_dtype overload has only a CUDA kernel"
FLOAT32_RANGE = ("float64 computes in float32 (the 64-bit rule), so float64 results overflow where float32's do "
                 "(past about 88 here; the CPU's float64 reaches 1e308): docs/limitations.md")
# cost rules shared by many records
ATTENTION_FORWARD = Attention(passes=1)
ATTENTION_BACKWARD = Attention(passes=2)  # dQ, dK, dV and the recomputed scores
SCALAR_PASS = Elementwise(scalar=1)  # activation functions: one ScalarE table lookup per element
DERIVATIVE_TIMES_GRADIENT = Elementwise(scalar=1, vector=2)  # the derivative on ScalarE, times the gradient
RANDOM_BITS = Elementwise(gpsimd=1)  # random numbers are drawn on GpSimd
RANDOM_NORMAL = Elementwise(gpsimd=2)  # two uniform draws per normal sample
MEMSET = Elementwise(vector=0.5)  # memset into 16-bit types runs at N/2
DROPOUT = Elementwise(gpsimd=1, vector=2)  # random bits on GpSimd, then mask and scale
# what the device issues for a creation op (`issued`): its composite kernel allocates (empty) and fills in place
ZEROED, FILLED = "aten::zero_", "aten::fill_"
RAW_BYTES = ("its composite kernel reads and writes the tensors' bytes directly, which on the device would bypass the "
             "queue (racing the work that makes its inputs): run as one device op")
RAW_BYTES_IN_AUTOGRAD = ("its composite kernel reads and writes the tensor's bytes directly, which on the device would "
                         "bypass the queue; TorchNeuron registers no kernel for it, so its device ops run on the "
                         "autograd key, which every call passes outside torch.inference_mode")
SPARSE_FACTORY = "its composite code builds a sparse compressed tensor around device tensors without a sparse kernel"
FLOAT_SCALE = "float scale factors may set the output size"
ITS_BACKWARD = "its backward"
ANTIALIASED = "antialiased interpolation in image preprocessing"
ONE_OP = "TorchNeuron registers it and runs it as one op, tracked under its name; its composite kernel would run (and track) its parts"
IN_PLACE_BY_OUT_KERNEL = ("TorchNeuron runs the in-place form as its out= kernel writing into the tensor (tracked under "
                          "the out= overload); the functional form runs whole")
CONCATENATED_MATMUL = ("TorchNeuron's concatenation engine targets matmul-heavy sequences and merges the matmuls with "
                       "the element-wise ops before them into one fused operator")
FMA = ("ATen computes `a + alpha * b` with one rounding (fused multiply-add), which the generated code does not "
       "reproduce bit for bit for other alphas")

OPS = {
    "aten::_batch_norm_no_update": Record(run=WHOLE_INCLUDING_OUT, why="its CompositeExplicitAutograd kernel calls batch_norm_cpu directly, which refuses device tensors"),
    "aten::_convolution": Record(run=WHOLE, why="would end in convolution_overrideable, a hook every device must implement", cost=Matmul("convolution")),
    "aten::_convolution.deprecated": Record(why="TorchScript's legacy overload: its composite kernel calls _convolution (run whole), and keeps autograd"),
    "aten::_copy_from": Record(issued=COPY),
    "aten::_copy_from_and_resize": Record(NATIVE, why=DOCS_ONLY + "; a kernel of the device's own (csrc/aten/kernels.cpp): a CPU fallback's result written back into an empty or same-size device tensor, which is a host-to-device transfer (priced where it is issued, as every transfer is)"),
    "aten::_efficient_attention_backward": Record(run=decompose(efficient_attention_backward), why=ATTENTION),
    "aten::_efficient_attention_forward": Record(run=decompose(efficient_attention_forward), why=ATTENTION),
    "aten::_embedding_bag": Record(index_args_64bit_exempt=True),
    "aten::_embedding_bag_backward": Record(index_args_64bit_exempt=True),
    "aten::_flash_attention_backward": Record(run=decompose(flash_attention_backward), why=ATTENTION),
    "aten::_flash_attention_forward": Record(run=decompose(flash_attention_forward), why=ATTENTION),
    "aten::_foreach_abs": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_abs_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_acos": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_acos_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_add": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_add_": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_addcdiv": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_addcdiv_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_addcmul": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_addcmul_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_asin": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_asin_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_atan": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_atan_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_ceil": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_ceil_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_clamp_max": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_clamp_max_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_clamp_min": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_clamp_min_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_clone": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_copy": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_copy_": Record(run=WHOLE, why=FOREACH, overwrites=True),
    "aten::_foreach_cos": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_cos_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_cosh": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_cosh_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_div": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_div_": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_erf": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_erf_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_erfc": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_erfc_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_exp": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_exp_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_expm1": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_expm1_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_floor": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_floor_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_frac": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_frac_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_lerp": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_lerp_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_lgamma": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_lgamma_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log10": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log10_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log1p": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log1p_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log2": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log2_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_log_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_max": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_maximum": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_maximum_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_minimum": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_minimum_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_mm": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_mul": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_mul_": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_neg": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_neg_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_norm": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_pow": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_pow_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_powsum": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_reciprocal": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_reciprocal_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_round": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_round_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_rsqrt": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_rsqrt_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sigmoid": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sigmoid_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sign": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sign_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sin": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sin_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sinh": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sinh_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sqrt": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sqrt_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_sub": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_sub_": Record(NATIVE, run=WHOLE, why=FOREACH),
    "aten::_foreach_tan": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_tan_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_tanh": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_tanh_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_trunc": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_trunc_": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_zero": Record(run=WHOLE, why=FOREACH),
    "aten::_foreach_zero_": Record(run=WHOLE, why=FOREACH, overwrites=True),
    "aten::_fused_adamw_": Record(NATIVE),
    "aten::_fused_rms_norm": Record(NATIVE, run=WHOLE, why=ONE_OP, cost=Rows(vector=2, scalar=1)),
    "aten::_fused_rms_norm_backward": Record(NATIVE, run=on_host(fused_rms_norm_backward), why="the backward of _fused_rms_norm (run whole), which has kernels for CUDA and MPS only; TorchNeuron runs it as one op", cost=Rows(vector=5)),
    "aten::_fused_sgd_": Record(quirk=FUSED_SGD),
    "aten::_grid_sampler_2d_cpu_fallback": Record(run=WHOLE_INCLUDING_OUT, why=RAW_BYTES),
    "aten::_grid_sampler_2d_cpu_fallback_backward": Record(run=WHOLE, why=RAW_BYTES),
    "aten::_grouped_mm": Record(NATIVE, run=WHOLE, why=ONE_OP + " (mm.out per group)", cost=Matmul("grouped_mm")),
    "aten::_has_compatible_shallow_copy_type": Record(NATIVE),
    "aten::_index_put_impl_": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::_lazy_clone": Record(run=decompose(lazy_clone), why="copy-on-write needs a plain host data pointer; device memory is cloned eagerly (the same values, the same independence)"),
    "aten::_linalg_det": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::_linalg_eigh": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::_linalg_slogdet": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::_linalg_svd": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::_local_scalar_dense": Record(NATIVE, why="reads the value back through a host copy", cost=FREE),
    "aten::_log_softmax": Record(NATIVE, quirk=SOFTMAX_HALF_TO_FLOAT, cost=Rows(vector=2, scalar=2)),
    "aten::_log_softmax_backward_data": Record(NATIVE, quirk=SOFTMAX_BACKWARD_TO_HALF, cost=Rows(vector=3, scalar=1)),
    "aten::_native_multi_head_attention": Record(NATIVE, quirk=NATIVE_MULTI_HEAD_ATTENTION),
    "aten::_nested_from_padded": Record(unsupported=NESTED),
    "aten::_nested_tensor_from_mask": Record(unsupported=TRANSFORMER_FAST_PATH),
    "aten::_nested_tensor_from_tensor_list": Record(unsupported=NESTED),
    "aten::_reshape_alias": Record(NATIVE),
    "aten::_saturate_weight_to_fp16": Record(run=decompose(saturate_weight_to_fp16, autograd=True, backend=False), why=RAW_BYTES_IN_AUTOGRAD),
    "aten::_scaled_dot_product_efficient_attention": Record(cost=ATTENTION_FORWARD),
    "aten::_scaled_dot_product_efficient_attention_backward": Record(cost=ATTENTION_BACKWARD),
    "aten::_scaled_dot_product_flash_attention": Record(cost=ATTENTION_FORWARD),
    "aten::_scaled_dot_product_flash_attention_backward": Record(cost=ATTENTION_BACKWARD),
    "aten::_scaled_dot_product_flash_attention_for_cpu": Record(cost=ATTENTION_FORWARD),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": Record(cost=ATTENTION_BACKWARD),
    "aten::_scaled_dot_product_fused_attention_overrideable": Record(NATIVE, run=WHOLE, index_args_64bit_exempt=True, why="the device hook for fused SDPA; its default raises", cost=ATTENTION_FORWARD, int_results_from_shapes="max_q and max_k are the sequence lengths", seeded_without_draws="dropout only; its host kernel (csrc/aten/attention.cpp, CPU flash attention) refuses dropout_p > 0"),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": Record(NATIVE, run=WHOLE, index_args_64bit_exempt=True, why="the device hook's backward; its default raises", cost=ATTENTION_BACKWARD),
    "aten::_scaled_mm": Record(CPU_FALLBACK, why="no Neuron kernel in the snapshot", cost=Matmul("mm")),
    "aten::_softmax": Record(NATIVE, quirk=SOFTMAX_HALF_TO_FLOAT, cost=Rows(vector=2, scalar=1)),
    "aten::_softmax_backward_data": Record(NATIVE, quirk=SOFTMAX_BACKWARD_TO_HALF, cost=Rows(vector=4)),
    "aten::_sparse_bsc_tensor_unsafe": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::_sparse_bsr_tensor_unsafe": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::_sparse_compressed_tensor_unsafe": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::_sparse_compressed_tensor_with_dims": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::_sparse_csc_tensor_unsafe": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::_sparse_csr_tensor_unsafe": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::_stack": Record(run=WHOLE_INCLUDING_OUT, why="its composite kernel (for every device but the CPU) concatenates inputs it expects unsqueezed already; the CPU kernel stacks"),
    "aten::_thnn_fused_gru_cell": Record(run=decompose(fused_gru_cell), why=CELL),
    "aten::_thnn_fused_gru_cell_backward": Record(run=decompose(fused_gru_cell_backward), why=CELL),
    "aten::_thnn_fused_lstm_cell": Record(run=decompose(fused_lstm_cell), why=CELL),
    "aten::_thnn_fused_lstm_cell_backward_impl": Record(run=decompose(fused_lstm_cell_backward_impl), why=CELL),
    "aten::_to_copy": Record(NATIVE, cost=CONVERSION, issued=COPY, healthy_read=READS_ITS_INPUT),
    "aten::_to_sparse": Record(unsupported=SPARSE),
    "aten::_to_sparse_bsc": Record(unsupported=SPARSE),
    "aten::_to_sparse_bsr": Record(unsupported=SPARSE),
    "aten::_to_sparse_csc": Record(unsupported=SPARSE),
    "aten::_to_sparse_csr": Record(unsupported=SPARSE),
    "aten::_unique2": Record(index_args_64bit_exempt=True),
    "aten::_unsafe_view": Record(cost=MOVEMENT, issued=NOTHING),
    "aten::_upsample_bicubic2d_aa": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback=ANTIALIASED),
    "aten::_upsample_bicubic2d_aa_backward": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback=ITS_BACKWARD),
    "aten::_upsample_bilinear2d_aa": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback=ANTIALIASED),
    "aten::_upsample_bilinear2d_aa_backward": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback=ITS_BACKWARD),
    "aten::abs": Record(NATIVE, fusible=(Fuse("", ANY),)),
    "aten::add": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch", fusible=(Fuse("Tensor", NUMBERS_FLOAT32, only_with=("alpha", 1), why=FMA),), fast=Fast(BINARY_ALPHA, "Tensor")),
    "aten::add_": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch", fast=Fast(BINARY_ALPHA_IN_PLACE, "Tensor", out="Tensor")),
    "aten::addcdiv": Record(NATIVE),
    "aten::addcmul": Record(NATIVE),
    "aten::addmm": Record(NATIVE, cost=Matmul("addmm"), matmul_segment=CONCATENATED_MATMUL),
    "aten::addmm.dtype": Record(run=decompose(addmm_dtype), why=OUT_DTYPE),
    "aten::addmv": Record(NATIVE),
    "aten::addmv_": Record(NATIVE),
    "aten::alias": Record(healthy_read=READS_ITS_INPUT),
    "aten::all": Record(NATIVE, cost=REDUCTION, healthy_read=READS_ITS_INPUT),
    "aten::amax": Record(NATIVE, quirk=OUT_OF_ANOTHER_DTYPE, cost=REDUCTION),
    "aten::amin": Record(NATIVE, quirk=OUT_OF_ANOTHER_DTYPE, cost=REDUCTION),
    "aten::any": Record(NATIVE, cost=REDUCTION, healthy_read=READS_ITS_INPUT),
    "aten::arange": Record(NATIVE, run=WHOLE, tracked_as="aten::arange.start_out", why="one op with a fixed output shape, queued, not an out= call that resizes; TorchNeuron's kernel is arange.start_out, which every overload's composite kernel calls, and its trackers list that", cost=FREE, shape_from_float_or_string="the float start/end/step set the length", shape_from_scalars="start, end and step set the length"),
    "aten::argmax": Record(index_args_64bit_exempt=True, cost=REDUCTION),
    "aten::argmin": Record(index_args_64bit_exempt=True, cost=REDUCTION),
    "aten::argsort": Record(CPU_FALLBACK, index_args_64bit_exempt=True, why="stable overload computed on the host (csrc/aten/TensorShape.cpp)"),
    "aten::as_strided": Record(NATIVE),
    "aten::baddbmm": Record(cost=Matmul("bmm")),
    "aten::baddbmm.dtype": Record(run=decompose(baddbmm_dtype), why=OUT_DTYPE),
    "aten::batch_norm_backward_elemt": Record(NATIVE, run=on_host(batch_norm_backward_elemt), why=SYNC_BATCH_NORM, cost=Elementwise(vector=2)),
    "aten::batch_norm_backward_reduce": Record(NATIVE, run=on_host(batch_norm_backward_reduce), why=SYNC_BATCH_NORM, cost=REDUCTION),
    "aten::batch_norm_elemt": Record(NATIVE, run=on_host(batch_norm_elemt), why=SYNC_BATCH_NORM, cost=Elementwise(vector=2)),
    "aten::batch_norm_gather_stats": Record(run=on_host(batch_norm_gather_stats), why=SYNC_BATCH_NORM, cost=REDUCTION),
    "aten::batch_norm_gather_stats_with_counts": Record(NATIVE, run=on_host(batch_norm_gather_stats_with_counts), why=SYNC_BATCH_NORM, cost=REDUCTION),
    "aten::batch_norm_stats": Record(NATIVE, run=on_host(batch_norm_stats), why=SYNC_BATCH_NORM, cost=REDUCTION),
    "aten::bernoulli": Record(CPU_FALLBACK, why=RNG, cost=RANDOM_BITS),
    "aten::bernoulli_": Record(CPU_FALLBACK, why=RNG, cost=RANDOM_BITS),
    "aten::bincount": Record(index_args_64bit_exempt=True),
    "aten::bitwise_and": Record(NATIVE, healthy_read=READS_BOTH),
    "aten::bitwise_left_shift": Record(NATIVE),
    "aten::bitwise_not": Record(NATIVE, healthy_read=READS_NEGATED),
    "aten::bitwise_or": Record(NATIVE, healthy_read=READS_EITHER),
    "aten::bitwise_right_shift": Record(NATIVE),
    "aten::bitwise_xor": Record(NATIVE, healthy_read=READS_EXACTLY_ONE),
    "aten::bmm": Record(NATIVE, cost=Matmul("bmm"), fast=Fast(BINARY), matmul_segment=CONCATENATED_MATMUL),
    "aten::bmm.dtype": Record(run=decompose(bmm_dtype), why=OUT_DTYPE),
    "aten::cat": Record(NATIVE, cost=MOVEMENT),
    "aten::cauchy_": Record(CPU_FALLBACK, why=RNG),
    "aten::ceil": Record(NATIVE),
    "aten::cholesky_inverse": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::clamp": Record(NATIVE, fusible=(Fuse("", ANY, why="generated from adaptive_eager/compile.py's EXACT_DECOMPOSITIONS, which keep ATen's signed zeros"),)),
    "aten::clamp_max": Record(NATIVE),
    "aten::clamp_min": Record(NATIVE),
    "aten::clone": Record(NATIVE, run=WHOLE, why="one copy instead of empty_like + copy_", cost=MOVEMENT, fusible=(Fuse("", ANY),), healthy_read=READS_ITS_INPUT),
    "aten::constant_pad_nd": Record(NATIVE, run=WHOLE, why="TorchNeuron lowers it as one op", cost=MOVEMENT),
    "aten::contiguous": Record(NATIVE, why=DOCS_ONLY + "; preserve_format is taken as contiguous_format, as TorchNeuron takes it (csrc/aten/kernels.cpp)", cost=MOVEMENT),
    "aten::convolution": Record(NATIVE, run=WHOLE, why="would end in convolution_overrideable", cost=Matmul("convolution")),
    "aten::convolution_backward": Record(NATIVE, run=WHOLE, why="would end in convolution_backward_overrideable", quirk=CONVOLUTION_BACKWARD, cost=Matmul("convolution_backward")),
    "aten::copy_": Record(NATIVE, cost=MOVEMENT, issued=COPY, overwrites=True),
    "aten::cos": Record(NATIVE, cost=SCALAR_PASS),
    "aten::cumsum": Record(NATIVE, cost=REDUCTION),
    "aten::detach": Record(cost=FREE, healthy_read=READS_ITS_INPUT),
    "aten::div": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch", fusible=(Fuse("Tensor", ANY),), fast=Fast(BINARY, "Tensor")),
    "aten::div_": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch"),
    "aten::dot": Record(NATIVE),
    "aten::einsum": Record(shape_from_float_or_string="the equation string sets the output dimensions"),
    "aten::elu": Record(cost=SCALAR_PASS),
    "aten::elu_backward": Record(cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::embedding": Record(NATIVE, run=WHOLE, index_args_64bit_exempt=True, why="decomposes into index_select", cost=MOVEMENT),
    "aten::embedding_dense_backward": Record(NATIVE, index_args_64bit_exempt=True, cost=MOVEMENT),
    "aten::empty": Record(NATIVE, cost=FREE, issued=NOTHING),
    "aten::empty_like": Record(cost=FREE, issued=NOTHING),
    "aten::empty_strided": Record(NATIVE, cost=FREE, issued=NOTHING),
    "aten::eq": Record(NATIVE, fusible=(Fuse("Tensor", ANY), Fuse("Scalar", ANY)), healthy_read=READS_EQUAL_TO_ITSELF),
    "aten::erf": Record(NATIVE, cost=SCALAR_PASS),
    "aten::erfc": Record(cost=SCALAR_PASS),
    "aten::erfinv": Record(NATIVE),
    "aten::exp": Record(NATIVE, cost=SCALAR_PASS, fast=Fast(UNARY)),
    "aten::exp2": Record(cost=SCALAR_PASS),
    "aten::exp_": Record(cost=SCALAR_PASS),
    "aten::expand": Record(healthy_read=READS_ITS_INPUT),
    "aten::expm1": Record(cost=SCALAR_PASS),
    "aten::exponential_": Record(CPU_FALLBACK, why=RNG),
    "aten::eye": Record(NATIVE),
    "aten::fill_": Record(NATIVE, cost=MEMSET, overwrites=True),
    "aten::flip": Record(NATIVE, cost=MOVEMENT),
    "aten::floor_divide": Record(NATIVE),
    "aten::full": Record(NATIVE, run=WHOLE_INCLUDING_OUT, why=ONE_OP + " (empty, fill_); TorchNeuron registers full.out too, so full(out=) is one op, not resize_ and fill_", cost=MEMSET),
    "aten::full_like": Record(cost=FREE, issued=FILLED),
    "aten::gather": Record(NATIVE, index_args_64bit_exempt=True, cost=MOVEMENT),
    "aten::gather_backward": Record(index_args_64bit_exempt=True),
    "aten::gcd": Record(why="int64 is computed in 32 bits and results outside int32 wrap: gcd(-2**31, 0) gives -2**31 (the CPU's int64 kernel: 2**31); int8/16/32 match the CPU"),
    "aten::ge": Record(NATIVE),
    "aten::gelu": Record(NATIVE, cost=SCALAR_PASS),
    "aten::gelu_": Record(NATIVE),
    "aten::gelu_backward": Record(NATIVE, cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::geometric_": Record(CPU_FALLBACK, why=RNG),
    "aten::grid_sampler_2d": Record(quirk=GRID_SAMPLER),
    "aten::grid_sampler_2d_backward": Record(quirk=GRID_SAMPLER),
    "aten::grid_sampler_3d": Record(quirk=GRID_SAMPLER),
    "aten::grid_sampler_3d_backward": Record(quirk=GRID_SAMPLER),
    "aten::gt": Record(NATIVE, fusible=(Fuse("Tensor", ANY), Fuse("Scalar", ANY))),
    "aten::hardsigmoid": Record(cost=SCALAR_PASS),
    "aten::hardswish": Record(cost=SCALAR_PASS),
    "aten::hardswish_backward": Record(cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::histc": Record(NATIVE, quirk=HISTC),
    "aten::i0": Record(why=FLOAT32_RANGE),
    "aten::index": Record(NATIVE, index_args_64bit_exempt=True, cost=MOVEMENT, kernel_error=lowering_errors.index_out_of_bounds),
    "aten::index_add": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::index_add_": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::index_copy": Record(NATIVE, index_args_64bit_exempt=True, lowering_error=lowering_errors.index_copy),
    "aten::index_copy_": Record(NATIVE, index_args_64bit_exempt=True, lowering_error=lowering_errors.index_copy),
    "aten::index_fill": Record(index_args_64bit_exempt=True),
    "aten::index_fill_": Record(index_args_64bit_exempt=True),
    "aten::index_put": Record(index_args_64bit_exempt=True, cost=MOVEMENT),
    "aten::index_put_": Record(index_args_64bit_exempt=True, cost=MOVEMENT),
    "aten::index_select": Record(NATIVE, index_args_64bit_exempt=True, cost=MOVEMENT, lowering_error=lowering_errors.index_select),
    "aten::index_select_backward": Record(NATIVE, run=WHOLE, index_args_64bit_exempt=True, why=ONE_OP + " (zeros, index_add_); it has no autograd kernel of its own, so a double backward of index_select runs its decomposition (whole_ops.py)", cost=MOVEMENT, lowering_error=lowering_errors.index_select_backward),
    "aten::isfinite": Record(NATIVE, run=WHOLE, why=ONE_OP + " (abs, eq, mul, ne); a bool result has no gradient", healthy_read=READS_TRUE),
    "aten::isinf": Record(NATIVE, run=WHOLE, why=ONE_OP + " (abs, eq)", healthy_read=READS_FALSE),
    "aten::isnan": Record(NATIVE, healthy_read=READS_FALSE),
    "aten::isneginf": Record(NATIVE, healthy_read=READS_FALSE),
    "aten::isposinf": Record(healthy_read=READS_FALSE),
    "aten::kaiser_window": Record(run=WHOLE_INCLUDING_OUT, why="calls kaiser_window_stub for the tensor's device (DispatchStub: missing kernel); " + FLOAT32_RANGE),
    "aten::kthvalue": Record(index_args_64bit_exempt=True),
    "aten::le": Record(NATIVE),
    "aten::lerp": Record(NATIVE),
    "aten::lerp_": Record(NATIVE),
    "aten::lift_fresh": Record(cost=FREE),
    "aten::linalg_cholesky_ex": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::linalg_inv_ex": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::linalg_ldl_factor_ex": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::linalg_lu_factor_ex": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::linalg_qr": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::linalg_vector_norm": Record(NATIVE, cost=REDUCTION),
    "aten::linear": Record(NATIVE, run=WHOLE, why=ONE_OP + " (t and addmm, or matmul); its autograd kernel's backward is linear_backward (csrc/aten/linear.cpp)", cost=Matmul("linear"), matmul_segment=CONCATENATED_MATMUL),
    "aten::linear_backward": Record(NATIVE, why="the backward of linear (run whole), a kernel of the device's own (csrc/aten/linear.cpp): PyTorch's only kernel is MKLDNN's", cost=Matmul("linear_backward")),
    "aten::linspace": Record(shape_from_float_or_string="float end points with a tensor step count"),
    "aten::log": Record(NATIVE, cost=SCALAR_PASS),
    "aten::log1p": Record(cost=SCALAR_PASS),
    "aten::log2": Record(cost=SCALAR_PASS),
    "aten::log_normal_": Record(CPU_FALLBACK, why=RNG),
    "aten::log_softmax": Record(NATIVE),
    "aten::logical_and": Record(NATIVE, healthy_read=READS_BOTH),
    "aten::logical_not": Record(NATIVE, healthy_read=READS_NEGATED),
    "aten::logical_or": Record(NATIVE, healthy_read=READS_EITHER),
    "aten::logical_xor": Record(NATIVE, healthy_read=READS_EXACTLY_ONE),
    "aten::logit_backward": Record(quirk=LOGIT_BACKWARD),
    "aten::logspace": Record(shape_from_float_or_string="float end points with a tensor step count"),
    "aten::logsumexp": Record(cost=REDUCTION),
    "aten::lt": Record(NATIVE, fusible=(Fuse("Tensor", ANY), Fuse("Scalar", ANY))),
    "aten::masked_fill": Record(NATIVE, run=WHOLE, why="TorchNeuron lowers it as one op"),
    "aten::masked_fill_": Record(NATIVE),
    "aten::masked_select": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::max": Record(NATIVE, index_args_64bit_exempt=True, cost=REDUCTION),
    "aten::max_pool2d_with_indices": Record(index_args_64bit_exempt=True),
    "aten::max_pool2d_with_indices_backward": Record(index_args_64bit_exempt=True),
    "aten::max_pool3d_with_indices": Record(index_args_64bit_exempt=True),
    "aten::max_pool3d_with_indices_backward": Record(index_args_64bit_exempt=True),
    "aten::max_unpool2d": Record(index_args_64bit_exempt=True),
    "aten::mean": Record(NATIVE, run=WHOLE, why="TorchNeuron lowers it as one op", cost=REDUCTION),
    "aten::min": Record(index_args_64bit_exempt=True, cost=REDUCTION),
    "aten::mish": Record(cost=SCALAR_PASS),
    "aten::mish_backward": Record(cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::mm": Record(NATIVE, cost=Matmul("mm"), fast=Fast(BINARY), matmul_segment=CONCATENATED_MATMUL, lowering_error=lowering_errors.mm),
    "aten::mm.dtype": Record(run=decompose(mm_dtype), why=OUT_DTYPE),
    "aten::mode": Record(run=WHOLE_INCLUDING_OUT, index_args_64bit_exempt=True, why="mode.values accepts only CPU, CUDA and XPU tensors"),
    "aten::mse_loss": Record(run=WHOLE, why="its out= decomposition resizes a 0-dim output, which PyTorch warns about"),
    "aten::mul": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch", fusible=(Fuse("Tensor", ANY),), fast=Fast(BINARY, "Tensor"), healthy_read=READS_BOTH),
    "aten::mul_": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch", fast=Fast(BINARY_IN_PLACE, "Tensor", out="Tensor")),
    "aten::multi_margin_loss": Record(index_args_64bit_exempt=True),
    "aten::multinomial": Record(CPU_FALLBACK, why=RNG),
    "aten::mv": Record(NATIVE),
    "aten::native_batch_norm": Record(quirk=BATCH_NORM, writes=("running_mean", "running_var"), why="its schema does not mark the running statistics it updates"),
    "aten::native_batch_norm_backward": Record(quirk=BATCH_NORM_BACKWARD),
    "aten::native_dropout": Record(NATIVE, why="keep-mask drawn with host RNG, then applied on device", cost=DROPOUT),
    "aten::native_dropout_backward": Record(NATIVE, cost=Elementwise(vector=2)),
    "aten::native_group_norm": Record(run=WHOLE, why="decomposes into five ops, each rounding to bf16"),
    "aten::native_layer_norm": Record(NATIVE, run=WHOLE, why="decomposes into batch_norm on a reshaped input", cost=Rows(vector=4, scalar=1)),
    "aten::native_layer_norm_backward": Record(NATIVE, cost=Rows(vector=8, scalar=1)),
    "aten::ne": Record(NATIVE, fusible=(Fuse("Tensor", ANY),), healthy_read=READS_UNEQUAL_TO_ITSELF),
    "aten::neg": Record(NATIVE, fusible=(Fuse("", ANY),), fast=Fast(UNARY)),
    "aten::neg_": Record(NATIVE, why=DOCS_ONLY),
    "aten::new_empty": Record(NATIVE, cost=FREE, issued=NOTHING),
    "aten::new_empty_strided": Record(cost=FREE),
    "aten::new_full": Record(cost=FREE, issued=FILLED),
    "aten::new_ones": Record(cost=FREE, issued=FILLED),
    "aten::new_zeros": Record(cost=FREE, issued=ZEROED),
    "aten::nll_loss2d_backward": Record(index_args_64bit_exempt=True),
    "aten::nll_loss2d_forward": Record(index_args_64bit_exempt=True),
    "aten::nll_loss_backward": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::nll_loss_forward": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::nonzero": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::nonzero_static": Record(NATIVE),
    "aten::norm": Record(cost=REDUCTION),
    "aten::normal": Record(CPU_FALLBACK, why=RNG),
    "aten::normal_": Record(CPU_FALLBACK, why=RNG, cost=RANDOM_NORMAL),
    "aten::one_hot": Record(NATIVE, run=WHOLE, index_args_64bit_exempt=True, why=ONE_OP + " (max, zeros, scatter_)", cost=MOVEMENT),
    "aten::ones": Record(NATIVE, run=WHOLE_INCLUDING_OUT, why=ONE_OP + " (empty, fill_), out= calls too (ones.out: resize_, fill_)", cost=MEMSET),
    "aten::ones_like": Record(NATIVE, run=WHOLE, why=ONE_OP + " (empty_like, fill_)", cost=MEMSET),
    "aten::poisson": Record(CPU_FALLBACK, why=RNG),
    "aten::polygamma": Record(why=FLOAT32_RANGE),
    "aten::pow": Record(NATIVE, cost=SCALAR_PASS, fusible=(Fuse("Tensor_Scalar", ANY, only_with=("exponent", 2), why="squares only: x * x in both; other exponents are not tested equal"),), fast=Fast(TENSOR_SCALAR, "Tensor_Scalar", out="Tensor_Scalar_out")),
    "aten::pow_": Record(cost=SCALAR_PASS),
    "aten::prod": Record(cost=REDUCTION),
    "aten::put_": Record(index_args_64bit_exempt=True),
    "aten::quantize_per_channel": Record(unsupported=QUANTIZED),
    "aten::quantize_per_tensor": Record(unsupported=QUANTIZED),
    "aten::rand": Record(CPU_FALLBACK, why=RNG, cost=RANDOM_BITS),
    "aten::rand_like": Record(CPU_FALLBACK, why=RNG),
    "aten::randint": Record(CPU_FALLBACK, why=RNG),
    "aten::randint_like": Record(CPU_FALLBACK, why=RNG),
    "aten::randn": Record(CPU_FALLBACK, why=RNG, cost=RANDOM_NORMAL),
    "aten::randn_like": Record(CPU_FALLBACK, why=RNG),
    "aten::random_": Record(CPU_FALLBACK, why=RNG),
    "aten::randperm": Record(CPU_FALLBACK, why=RNG),
    "aten::range": Record(shape_from_float_or_string="the float start/end/step set the length", shape_from_scalars="start, end and step set the length"),
    "aten::reciprocal": Record(NATIVE, cost=SCALAR_PASS, fusible=(Fuse("", ANY),)),
    "aten::reciprocal_": Record(NATIVE, cost=SCALAR_PASS),
    "aten::reflection_pad1d": Record(NATIVE),
    "aten::reflection_pad2d": Record(NATIVE),
    "aten::reflection_pad3d": Record(NATIVE),
    "aten::relu": Record(NATIVE, fusible=(Fuse("", ANY),), fast=Fast(UNARY)),
    "aten::relu_": Record(NATIVE),
    "aten::remainder": Record(NATIVE),
    "aten::repeat": Record(NATIVE, run=WHOLE, why="TorchNeuron lowers it as one op", cost=MOVEMENT),
    "aten::repeat_interleave": Record(NATIVE),
    "aten::replication_pad1d": Record(NATIVE),
    "aten::replication_pad2d": Record(NATIVE),
    "aten::replication_pad3d": Record(NATIVE),
    "aten::reshape": Record(healthy_read=READS_ITS_INPUT),
    "aten::resize_": Record(NATIVE, cost=FREE, reallocating_inplace_view=True, issued=NOTHING),
    "aten::resize_as_": Record(reallocating_inplace_view=True),
    "aten::rms_norm": Record(NATIVE, run=decompose(rms_norm, autograd=True), why="registered only for torch >= 2.9; TorchNeuron registers it itself, one _fused_rms_norm whatever the input and weight dtypes (PyTorch's composite code decomposes it when they differ)"),
    "aten::roll": Record(cost=MOVEMENT),
    "aten::rsqrt": Record(NATIVE, cost=SCALAR_PASS, fusible=(Fuse("", FLOAT32),), fast=Fast(UNARY)),
    "aten::rsqrt_": Record(cost=SCALAR_PASS),
    "aten::scalar_tensor": Record(NATIVE, run=WHOLE, why=ONE_OP + " (empty, fill_)", cost=MEMSET),
    "aten::scatter": Record(NATIVE, index_args_64bit_exempt=True, cost=MOVEMENT),
    "aten::scatter_": Record(NATIVE, index_args_64bit_exempt=True, why=DOCS_ONLY),
    "aten::scatter_add": Record(NATIVE, index_args_64bit_exempt=True, cost=MOVEMENT),
    "aten::scatter_add_": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::scatter_reduce": Record(index_args_64bit_exempt=True),
    "aten::scatter_reduce_": Record(index_args_64bit_exempt=True),
    "aten::searchsorted": Record(index_args_64bit_exempt=True),
    "aten::select_backward": Record(CPU_FALLBACK, why="C++ kernel computes on the host (csrc/aten/TensorShape.cpp)", cost=MOVEMENT, queued_fallback="the backward of x[i] (nn.MultiheadAttention's packed projection: 3 per layer per step); waiting for the queue there stalls every training step"),
    "aten::select_scatter": Record(cost=MOVEMENT),
    "aten::set_": Record(NATIVE, cost=FREE, reallocating_inplace_view=True),
    "aten::sgn": Record(NATIVE),
    "aten::sigmoid": Record(NATIVE, cost=SCALAR_PASS, fast=Fast(UNARY)),
    "aten::sigmoid_": Record(cost=SCALAR_PASS),
    "aten::sigmoid_backward": Record(NATIVE, cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::sign": Record(NATIVE),
    "aten::signbit": Record(NATIVE),
    "aten::silu": Record(NATIVE, cost=SCALAR_PASS, fast=Fast(UNARY)),
    "aten::silu_": Record(cost=SCALAR_PASS),
    "aten::silu_backward": Record(NATIVE, cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::sin": Record(NATIVE, cost=SCALAR_PASS),
    "aten::slice_backward": Record(NATIVE, run=WHOLE, why="MLIR kernel; a host-side C++ variant also exists in csrc/aten/TensorShape.cpp; run whole: TorchNeuron lowers it as one op", cost=MOVEMENT),
    "aten::slice_scatter": Record(cost=MOVEMENT),
    "aten::softmax": Record(NATIVE),
    "aten::softplus": Record(NATIVE, cost=SCALAR_PASS),
    "aten::softplus_backward": Record(NATIVE, cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::sort": Record(index_args_64bit_exempt=True),
    "aten::sparse_bsc_tensor": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::sparse_bsr_tensor": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::sparse_compressed_tensor": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::sparse_csc_tensor": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::sparse_csr_tensor": Record(unsupported=SPARSE, why=SPARSE_FACTORY),
    "aten::special_chebyshev_polynomial_u": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_chebyshev_polynomial_v": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_chebyshev_polynomial_w": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_i1": Record(why=FLOAT32_RANGE),
    "aten::special_laguerre_polynomial_l": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_legendre_polynomial_p": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_shifted_chebyshev_polynomial_t": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_shifted_chebyshev_polynomial_u": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_shifted_chebyshev_polynomial_v": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::special_shifted_chebyshev_polynomial_w": Record(quirk=ORTHOGONAL_POLYNOMIAL),
    "aten::sqrt": Record(NATIVE, cost=SCALAR_PASS),
    "aten::sqrt_": Record(NATIVE, why=DOCS_ONLY, cost=SCALAR_PASS),
    "aten::squeeze": Record(healthy_read=READS_ITS_INPUT),
    "aten::stack": Record(NATIVE, run=WHOLE_INCLUDING_OUT, why="TorchNeuron lowers it as one op, stack.out too (tracked as aten::stack.out, not the cat.out of its composite)", cost=MOVEMENT),
    "aten::std": Record(cost=REDUCTION),
    "aten::sub": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch", fusible=(Fuse("Tensor", NUMBERS_FLOAT32, only_with=("alpha", 1), why=FMA),), fast=Fast(BINARY_ALPHA, "Tensor")),
    "aten::sub_": Record(NATIVE, run=WHOLE, why="scalar overloads wrap the scalar and redispatch"),
    "aten::sum": Record(NATIVE, cost=REDUCTION),
    "aten::take": Record(index_args_64bit_exempt=True),
    "aten::tanh": Record(NATIVE, cost=SCALAR_PASS, fast=Fast(UNARY)),
    "aten::tanh_": Record(cost=SCALAR_PASS),
    "aten::tanh_backward": Record(NATIVE, cost=DERIVATIVE_TIMES_GRADIENT),
    "aten::threshold": Record(NATIVE),
    "aten::threshold_backward": Record(NATIVE),
    "aten::to_mkldnn": Record(unsupported=MKLDNN),
    "aten::to_sparse": Record(unsupported=SPARSE),
    "aten::to_sparse_csr": Record(unsupported=SPARSE),
    "aten::topk": Record(NATIVE, index_args_64bit_exempt=True),
    "aten::triangular_solve": Record(CPU_FALLBACK, why=HOST_ROUTED),
    "aten::tril": Record(NATIVE, cost=MOVEMENT),
    "aten::tril_": Record(run=OUT_KERNEL, why=IN_PLACE_BY_OUT_KERNEL),
    "aten::triu": Record(NATIVE, cost=MOVEMENT),
    "aten::triu_": Record(run=OUT_KERNEL, why=IN_PLACE_BY_OUT_KERNEL),
    "aten::trunc": Record(NATIVE),
    "aten::unfold": Record(NATIVE),
    "aten::uniform_": Record(CPU_FALLBACK, why=RNG, cost=RANDOM_BITS),
    "aten::unique_dim": Record(index_args_64bit_exempt=True),
    "aten::unsqueeze": Record(healthy_read=READS_ITS_INPUT),
    "aten::upsample_bicubic2d": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback="interpolation in image models"),
    "aten::upsample_bicubic2d_backward": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback=ITS_BACKWARD),
    "aten::upsample_bilinear2d": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, shape_from_float_or_string=FLOAT_SCALE, queued_fallback="interpolation in every step of diffusion U-Nets"),
    "aten::upsample_bilinear2d_backward": Record(CPU_FALLBACK, why=NO_KERNEL_UNIMPLEMENTED, queued_fallback=ITS_BACKWARD),
    "aten::upsample_linear1d": Record(shape_from_float_or_string=FLOAT_SCALE),
    "aten::upsample_nearest1d": Record(shape_from_float_or_string=FLOAT_SCALE),
    "aten::upsample_nearest2d": Record(shape_from_float_or_string=FLOAT_SCALE),
    "aten::upsample_nearest3d": Record(shape_from_float_or_string=FLOAT_SCALE),
    "aten::upsample_trilinear3d": Record(shape_from_float_or_string=FLOAT_SCALE),
    "aten::value_selecting_reduction_backward": Record(NATIVE, run=WHOLE, why=ONE_OP + " (zeros, scatter); run whole it keeps no autograd of its own, so the double backward of max/min/median/mode along a dim is refused", cost=MOVEMENT),
    "aten::var": Record(cost=REDUCTION),
    "aten::var_mean": Record(cost=REDUCTION),
    "aten::view": Record(NATIVE, healthy_read=READS_ITS_INPUT),
    "aten::where": Record(NATIVE, fusible=(Fuse("self", ANY),), healthy_read=READS_SELECTED),
    "aten::zero_": Record(NATIVE, cost=MEMSET, overwrites=True),
    "aten::zeros": Record(NATIVE, run=WHOLE_INCLUDING_OUT, why=ONE_OP + " (empty, zero_), out= calls too (zeros.out: resize_, zero_)", cost=MEMSET),
    "aten::zeros_like": Record(cost=FREE, issued=ZEROED),
    "_c10d_functional::_wrap_tensor_autograd": Record(
        collective_result="the autograd wrapper of a functional collective's result: the tensor itself"),
    "_c10d_functional::all_gather_into_tensor": Record(collective=Collective("all_gather", OUTPUTS)),
    "_c10d_functional::all_gather_into_tensor_coalesced": Record(collective=Collective("all_gather", OUTPUTS)),
    "_c10d_functional::all_reduce": Record(collective=Collective("all_reduce", INPUTS)),
    "_c10d_functional::all_reduce_coalesced": Record(collective=Collective("all_reduce", INPUTS)),
    "_c10d_functional::all_to_all_single": Record(collective=Collective("all_to_all", INPUTS)),
    "_c10d_functional::broadcast": Record(collective=Collective("broadcast", INPUTS)),
    "_c10d_functional::reduce_scatter_tensor": Record(collective=Collective("reduce_scatter", INPUTS)),
    "_c10d_functional::reduce_scatter_tensor_coalesced": Record(collective=Collective("reduce_scatter", INPUTS)),
    "_c10d_functional::wait_tensor": Record(
        collective_result="waits for the functional collective that made its input, which then holds the result"),
    "c10d::_allgather_base_": Record(collective=Collective("all_gather", OUTPUTS)),
    "c10d::_reduce_scatter_base_": Record(collective=Collective("reduce_scatter", INPUTS)),
    "c10d::allgather_": Record(collective=Collective("all_gather", OUTPUTS)),
    "c10d::allgather_coalesced_": Record(collective=Collective("all_gather", OUTPUTS)),
    "c10d::allgather_into_tensor_coalesced_": Record(collective=Collective("all_gather", OUTPUTS)),
    "c10d::allreduce_": Record(collective=Collective("all_reduce", INPUTS)),
    "c10d::allreduce_coalesced_": Record(collective=Collective("all_reduce", INPUTS)),
    "c10d::alltoall_": Record(collective=Collective("all_to_all", INPUTS)),
    "c10d::alltoall_base_": Record(collective=Collective("all_to_all", INPUTS)),
    "c10d::broadcast_": Record(collective=Collective("broadcast", INPUTS)),
    "c10d::gather_": Record(collective=Collective("all_gather", OUTPUTS)),
    "c10d::recv_": Record(collective=Collective("recv", INPUTS)),
    "c10d::reduce_": Record(collective=Collective("all_reduce", INPUTS)),
    "c10d::reduce_scatter_": Record(collective=Collective("reduce_scatter", INPUTS)),
    "c10d::reduce_scatter_tensor_coalesced_": Record(collective=Collective("reduce_scatter", INPUTS)),
    "c10d::scatter_": Record(collective=Collective("all_gather", INPUTS)),
    "c10d::send": Record(collective=Collective("send", INPUTS)),
}


def record(op: str, overload: str = "") -> Record | None:
    """The record of "aten::name" called with `overload`: the overload's own record, else the op's."""
    return (overload and OPS.get(f"{op}.{overload}")) or OPS.get(op)


def names_with(field: str) -> dict:
    """op -> the value of `field` in its record, for the records that set it (the set other modules derive)."""
    return {op: getattr(r, field) for op, r in OPS.items() if getattr(r, field)}


QUEUEING_FIELDS = ("shape_from_float_or_string", "shape_from_scalars", "int_results_from_shapes",
                   "seeded_without_draws", "queued_fallback", "reallocating_inplace_view")


def fusible_overloads() -> dict[str, Fuse]:
    """"aten::name.overload" (or "aten::name" for the default overload) -> its Fuse entry."""
    return {f"{op}.{f.overload}" if f.overload else op: f for op, r in OPS.items() for f in r.fusible}


def matmul_segment_ops() -> list[str]:
    """The ops that join Adaptive Eager runs as matmuls (their records' matmul_segment), as C++ receives them."""
    return [op for op, r in OPS.items() if r.matmul_segment]


def lowering_error_checks() -> dict[str, Callable]:
    """op -> the check of TorchNeuron's lowering for its calls (records' lowering_error)."""
    return {op: r.lowering_error for op, r in OPS.items() if r.lowering_error is not None}


def fast_ops() -> list[tuple[str, str, str, str]]:
    """(op, overload, out overload, form) of each op with an unboxed entry point, as C++ installs them."""
    return [(op, r.fast.overload, r.fast.out, r.fast.form) for op, r in OPS.items() if r.fast is not None]


def describe(op: str, r: Record) -> str:
    """One line for `localneuron info --ops`: the op and the fields its record sets."""
    fields = [f"support={r.support or 'unlisted'}"]
    if r.fallback_dtypes:
        fields.append(f"fallback_dtypes={','.join(r.fallback_dtypes)}")
    if r.run is not None:
        fields.append(f"run={r.run}")
    if r.index_args_64bit_exempt:
        fields.append("index_args_64bit_exempt")
    if r.quirk is not None:
        fields.append(f"quirk={r.quirk.quirk}")
    if r.unsupported:
        fields.append(f"unsupported={r.unsupported}")
    if r.writes:
        fields.append(f"writes={','.join(r.writes)}")
    if r.cost is not None:
        fields.append(f"cost={r.cost}")
    for name in QUEUEING_FIELDS:
        value = getattr(r, name)
        if value:
            fields.append(name if value is True else f"{name}={value}")
    if r.fusible:
        fields.append(f"fusible={','.join(map(str, r.fusible))}")
    if r.matmul_segment:
        fields.append("matmul_segment")
    if r.fast is not None:
        fields.append(f"fast={r.fast}")
    if r.issued:
        fields.append(f"issued={r.issued}")
    if r.healthy_read:
        fields.append(f"healthy_read={r.healthy_read}")
    if r.collective is not None:
        fields.append(f"collective={r.collective}")
    if r.tracked_as:
        fields.append(f"tracked_as={r.tracked_as}")
    if r.why:
        fields.append(f"why={r.why}")
    return f"{op}: " + "; ".join(fields)


# -- the views the rest of the device reads --
OP_SUPPORT = {op: r.support for op, r in OPS.items() if r.support}
DTYPE_EXCEPTIONS = {op: r.fallback_dtypes for op, r in OPS.items() if r.fallback_dtypes}
WHOLE_OPS = {op: r.why for op, r in OPS.items() if r.run in (WHOLE, WHOLE_INCLUDING_OUT)}
INDEX_OPS = frozenset(op for op, r in OPS.items() if r.index_args_64bit_exempt)
UNSUPPORTED = {op: r.unsupported for op, r in OPS.items() if r.unsupported}
HOST_KERNEL_FIXES = {op: r.quirk for op, r in OPS.items() if r.quirk}
DECOMPOSITIONS = {op: r.run for op, r in OPS.items() if isinstance(r.run, Decompose)}
RUN_ON_HOST = {op: r.run.fn for op, r in OPS.items() if isinstance(r.run, OnHost)}
UNMARKED_WRITES = {op: list(r.writes) for op, r in OPS.items() if r.writes}
COST_RULES = {op: r.cost for op, r in OPS.items() if r.cost is not None}
use_rules(COST_RULES)  # the cost model prices each op by its record (it cannot import this layer)
