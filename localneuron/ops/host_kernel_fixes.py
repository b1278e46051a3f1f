"""Host kernels that do not compute what an accelerator computes, and what the device runs instead.

The device runs ops as the host's CPU kernels. Where a CPU kernel refuses a dtype an accelerator
accepts, or gets it wrong, the device runs the replacement below for the signatures it `applies` to
(on host copies of the inputs, results written back like a fallback, but counted as a native op).
Each replacement computes in float32 what the CPU kernel would compute at full precision, or raises the error
TorchNeuron raises where the CPU kernel's differs in type.
"""
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class HostKernelFix:
    quirk: str  # what the CPU kernel does wrong
    applies: Callable  # (args, kwargs) -> bool, on the device arguments
    kernel: Callable  # (op, *host_args, **host_kwargs) -> result, with op's schema


def _histc_needs_fix(args, kwargs) -> bool:
    x = args[0]
    return not x.is_floating_point() or x.dtype in LOW_PRECISION


def _histc(op, x, bins=100, min=0, max=0, *, out=None):
    # Integer input (MoE routers count tokens per expert this way on accelerators): exact counts in
    # the input's dtype, as CUDA returns them. Low precision: counted in float32, rounded once.
    counts = torch.histc(x.to(torch.float64 if not x.is_floating_point() else torch.float32), bins, min, max)
    counts = counts.to(x.dtype)
    if out is None:
        return counts
    return out.resize_(counts.shape).copy_(counts)


def _sgd_needs_fix(args, kwargs) -> bool:
    return any(p.dtype in LOW_PRECISION for p in args[0])


def _fused_sgd(op, params, grads, momentum_buffers, *, weight_decay, momentum, lr, dampening, nesterov,
               maximize, is_first_step, grad_scale=None, found_inf=None):
    if found_inf is not None and found_inf.item() == 1.0:
        return None
    lr = float(lr)
    for i, (p, g) in enumerate(zip(params, grads)):
        step = g.float()
        if grad_scale is not None:
            step = step / grad_scale.float()
        if maximize:
            step = -step
        if weight_decay:
            step = step + weight_decay * p.float()
        if momentum:
            buf = momentum_buffers[i]
            new_buf = step if is_first_step else momentum * buf.float() + (1 - dampening) * step
            buf.copy_(new_buf)
            step = step + momentum * new_buf if nesterov else new_buf
        p.copy_(p.float() - lr * step)
    return None


def _batch_norm_parameters(args) -> list:
    x, params = args[0], [t for t in args[1:5] if isinstance(t, torch.Tensor)]
    return x, params


def _mixed_batch_norm(args, kwargs) -> bool:
    # CPU accepts low-precision input with parameters all of the input's dtype or all float32
    x, params = _batch_norm_parameters(args)
    dtypes = {p.dtype for p in params}
    return x.dtype in LOW_PRECISION and not dtypes <= {x.dtype} and not dtypes <= {torch.float32}


def _float(t):
    return t.float() if isinstance(t, torch.Tensor) else t


def _native_batch_norm(op, x, weight, bias, running_mean, running_var, training, momentum, eps):
    stats = [_float(running_mean), _float(running_var)]
    result = op(x, _float(weight), _float(bias), *stats, training, momentum, eps)
    for original, computed in zip((running_mean, running_var), stats):
        if isinstance(original, torch.Tensor) and original is not computed:
            original.copy_(computed)
    return result


def _mixed_batch_norm_backward(args, kwargs) -> bool:
    grad_out, x, weight, running_mean, running_var = args[:5]
    return _mixed_batch_norm((x, weight, None, running_mean, running_var), kwargs)


def _native_batch_norm_backward(op, grad_out, x, weight, running_mean, running_var, save_mean, save_invstd,
                                train, eps, output_mask):
    grad_input, grad_weight, grad_bias = op(grad_out, x, _float(weight), _float(running_mean), _float(running_var),
                                            _float(save_mean), _float(save_invstd), train, eps, output_mask)
    if weight is not None:
        grad_weight = grad_weight.to(weight.dtype) if grad_weight is not None else None
        grad_bias = grad_bias.to(weight.dtype) if grad_bias is not None else None
    return grad_input, grad_weight, grad_bias


def _has_low_precision(args, kwargs) -> bool:
    return any(isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION for t in args)


def _widened(t):
    return t.float() if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION else t


def _in_float32(op, *args, **kwargs):
    """The op on float32 copies of its low-precision inputs, each result rounded once to their dtype
    (an accelerator's opmath); out= tensors receive the results in order."""
    dtype = next(t.dtype for t in args if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION)
    outs = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    results = op(*[_widened(a) for a in args], **{k: _widened(v) for k, v in kwargs.items()})
    single = isinstance(results, torch.Tensor)
    rounded = [r.to(dtype) if isinstance(r, torch.Tensor) and r.is_floating_point() else r
               for r in ([results] if single else results)]
    for out, r in zip(outs.values(), rounded):
        out.resize_(r.shape).copy_(r)
    rounded = list(outs.values()) or rounded
    return rounded[0] if single else tuple(rounded)


def _not_float64(args, kwargs) -> bool:
    return args[0].dtype != torch.float64  # float64 follows the 64-bit policy


def _logit_backward(op, grad_output, x, eps=None, *, grad_input=None):
    # CUDA's formula at every element: the CPU kernel's vectorized loop and its scalar loop (tails,
    # strided or broadcast operands) disagree at x = -0.0 (sign of the infinity) and at NaN with eps,
    # so the CPU's answer depends on the layout.
    dtype = grad_output.dtype
    g, x = grad_output.float(), x.float()
    lo, hi = (0.0, 1.0) if eps is None or eps < 0 else (eps, 1.0 - eps)
    fill = float("nan") if eps is None or eps < 0 else 0.0
    result = torch.where((x < lo) | (x > hi), torch.full_like(x, fill), g / (x * (1 - x))).to(dtype)
    if grad_input is None:
        return result
    return grad_input.resize_(result.shape).copy_(result)


def _every_call(args, kwargs) -> bool:
    return True


def _orthogonal_polynomial(op, x, n, *, out=None):
    # The CPU kernels' recurrences (ATen/native/Math.h) stop once the running term is NaN, before their first
    # step assigns the result: at x = NaN with n >= 2 they return an uninitialized register (different values
    # from call to call). The device returns NaN there, the value of a polynomial at NaN. float64 is computed
    # in float32 as every other float64 op (the 64-bit policy), then widened.
    result = op.overloadpacket(x, n)
    if result.dtype == torch.float64:
        narrowed = [v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float64 else v for v in (x, n)]
        result = op.overloadpacket(*narrowed).double()
    steps = torch.as_tensor(n)
    uninitialized = torch.as_tensor(x).isnan() & (steps >= 2) & (steps < 2.0 ** 63)  # the kernel's int64 n
    result = result.masked_fill(uninitialized, float("nan"))
    if out is None:
        return result
    return out.resize_(result.shape).copy_(result)


def _converts_half_to_float(args, kwargs) -> bool:
    return kwargs["half_to_float"] if "half_to_float" in kwargs else args[2]


def _softmax_half_to_float(op, x, dim, half_to_float, *, out=None):
    # what the accelerator's kernel computes: the float16 input read in float32, a float32 result
    result = op.overloadpacket(x.float(), dim, False)
    if out is None:
        return result
    return out.resize_(result.shape).copy_(result)


def _gradient_to_half(args, kwargs) -> bool:
    input_dtype = kwargs["input_dtype"] if "input_dtype" in kwargs else args[3]
    return args[0].dtype != input_dtype


def _softmax_backward_to_half(op, grad_output, output, dim, input_dtype, *, grad_input=None):
    # the backward of a half_to_float softmax: computed in float32, the gradient in the input's float16
    result = op.overloadpacket(grad_output, output, dim, grad_output.dtype).to(input_dtype)
    if grad_input is None:
        return result
    return grad_input.resize_(result.shape).copy_(result)


def _out_of_another_dtype(args, kwargs) -> bool:
    out = kwargs.get("out")
    return out is not None and out.dtype != args[0].dtype


def _refuse_out_of_another_dtype(op, x, *args, out, **kwargs):
    raise TypeError(f"Expected the dtype for input and out to match, but got {x.dtype} for input's dtype and "
                    f"{out.dtype} for out's dtype. Pass an out= tensor of dtype {x.dtype}, or call "
                    f"{op.overloadpacket.__name__} without out= and convert its result with .to({out.dtype}).")


def _output_mask(args, kwargs) -> list:
    return kwargs["output_mask"] if "output_mask" in kwargs else args[10]


def _bias_gradient_without_weight_gradient(args, kwargs) -> bool:
    _, weight_wanted, bias_wanted = _output_mask(args, kwargs)
    return bias_wanted and not weight_wanted


def _convolution_backward(op, *args, **kwargs):
    # the gradients output_mask leaves out are None, as CUDA returns them
    results = op(*args, **kwargs)
    return tuple(r if wanted else None for r, wanted in zip(results, _output_mask(args, kwargs)))


# TorchNeuron's flash attention kernel takes sequences whose length is a multiple of this; others run its XLA/MLIR
# implementation, and _native_multi_head_attention warns that they do (python_ops/native_multi_head_attention.py in
# the source snapshot of 2026-04-21; no documentation page states it)
FLASH_ATTENTION_SEQUENCE_MULTIPLE = 512


def _native_multi_head_attention(op, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                 proj_bias, mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    # TorchNeuron's kernel takes no mask tensor (checked first) and computes no attention weights; its second result
    # is an empty tensor (the CPU kernel's is undefined: None).
    if mask is not None:
        raise NotImplementedError(
            f"_native_multi_head_attention: Arbitrary mask tensors not yet supported on the neuron device (mask of "
            f"shape {list(mask.shape)}, mask_type={mask_type}). Call it with mask=None, or turn "
            "nn.MultiheadAttention's fast path off (torch.backends.mha.set_fastpath_enabled(False)) so the mask is "
            "applied by its other path, or use torch.nn.functional.scaled_dot_product_attention with attn_mask.")
    if need_weights:
        raise NotImplementedError(
            "_native_multi_head_attention: need_weights=True is not yet supported on the neuron device (the kernel "
            "returns no attention weights). Pass need_weights=False; nn.MultiheadAttention calls this op in eval "
            "mode without gradients (its fast path) with need_weights=True unless told otherwise, so pass "
            "need_weights=False there too, or turn the fast path off: torch.backends.mha.set_fastpath_enabled(False).")
    sequence = query.shape[1]
    if sequence % FLASH_ATTENTION_SEQUENCE_MULTIPLE:  # the same result, by TorchNeuron's other implementation
        warnings.warn(f"Sequence length {sequence} is not a multiple of {FLASH_ATTENTION_SEQUENCE_MULTIPLE}. Falling "
                      "back to XLA/MLIR implementation instead of flash attention for better compatibility.",
                      UserWarning, stacklevel=2)
    output, _ = op(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, None, False,
                   average_attn_weights, mask_type)
    return output, output.new_empty(0)


HISTC = HostKernelFix("histogram_cpu refuses integer inputs and counts in the input's low precision (saturates)",
                      _histc_needs_fix, _histc)
FUSED_SGD = HostKernelFix("CPU fused SGD computes wrong steps for float16/bfloat16 parameters",
                          _sgd_needs_fix, _fused_sgd)
BATCH_NORM = HostKernelFix("CPU batch_norm refuses low-precision input with mixed float32/low-precision parameters",
                           _mixed_batch_norm, _native_batch_norm)
BATCH_NORM_BACKWARD = HostKernelFix("as native_batch_norm", _mixed_batch_norm_backward, _native_batch_norm_backward)
GRID_SAMPLER = HostKernelFix("CPU grid_sampler computes coordinates and weights in float16/bfloat16 (bf16 grid "
                             "gradients off by whole units); an accelerator computes in float32", _has_low_precision,
                             _in_float32)
LOGIT_BACKWARD = HostKernelFix("the CPU kernel's vectorized and scalar loops disagree at x=-0.0 and at NaN with eps, so "
                               "its result depends on the layout; the device computes CUDA's formula everywhere",
                               _not_float64, _logit_backward)
ORTHOGONAL_POLYNOMIAL = HostKernelFix("the CPU kernels' recurrences return an uninitialized value at x=NaN for n>=2 "
                                      "(their loop stops before its first step); the device returns NaN",
                                      _every_call, _orthogonal_polynomial)
CONVOLUTION_BACKWARD = HostKernelFix("the CPU kernel returns a weight gradient output_mask did not ask for when it "
                                     "asks for the bias gradient (4-D for a 1-d convolution); the device returns None",
                                     _bias_gradient_without_weight_gradient, _convolution_backward)
SOFTMAX_HALF_TO_FLOAT = HostKernelFix("the CPU kernels of _softmax and _log_softmax refuse half_to_float=True, which "
                                      "an accelerator computes in float32 from its float16 input",
                                      _converts_half_to_float, _softmax_half_to_float)
SOFTMAX_BACKWARD_TO_HALF = HostKernelFix("the CPU kernels of the softmax backwards refuse a gradient of another "
                                         "dtype than the input's (the backward of half_to_float=True)",
                                         _gradient_to_half, _softmax_backward_to_half)
OUT_OF_ANOTHER_DTYPE = HostKernelFix("the CPU kernel refuses an out= of another dtype than the input with a "
                                     "RuntimeError naming ATen's scalar types (Int, Float); TorchNeuron raises "
                                     "TypeError naming the torch dtypes", _out_of_another_dtype,
                                     _refuse_out_of_another_dtype)
NATIVE_MULTI_HEAD_ATTENTION = HostKernelFix("the CPU kernel computes attention weights (need_weights=True) and "
                                            "applies mask tensors, and returns None for the weights it does not "
                                            "compute; TorchNeuron refuses the first two with NotImplementedError and "
                                            "returns an empty tensor", _every_call, _native_multi_head_attention)
