// linear as TorchNeuron runs it: one op forward (aten::linear, run whole by the executor: its record in
// localneuron/ops/op_records.py) whose backward is one op too, aten::linear_backward. PyTorch's linear is a
// composite (t + addmm, or matmul) differentiated piece by piece; a device that runs it whole owns its autograd
// kernel, which this file is.
//
// Invariant: a traced or transformed call (FakeTensor, functionalization, functorch, a __torch_dispatch__ subclass
// such as DTensor, or an active dispatch mode) takes PyTorch's composite with its own autograd, so graphs that
// torch.compile, export and the tensor-parallel layers see are exactly those of every other device.
#include "aten/counted_impl.h"
#include "executor/executor.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/RedispatchFunctions.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/linear_backward.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <array>
#include <tuple>

namespace localneuron {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Keys of tensors that are not plain device tensors: wrappers whose kernels must see PyTorch's decomposition.
constexpr c10::DispatchKeySet kWrapperKeys({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                            c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::FuncTorchGradWrapper,
                                            c10::DispatchKey::BatchedNestedTensor});

bool plain(const at::Tensor& t) { return !t.defined() || !t.key_set().has_any(kWrapperKeys); }

bool traced_or_transformed(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  if (!plain(input) || !plain(weight) || (bias.has_value() && !plain(*bias))) return true;
  if (c10::impl::dispatch_mode_enabled()) return true;
  return c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

// The gradients of linear(input, weight, bias) that output_mask asks for, from ops that are themselves
// differentiable: the double backward's formula, and the device kernel of aten::linear_backward.
std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_gradients(const at::Tensor& input, const at::Tensor& grad_output,
                                                                const at::Tensor& weight,
                                                                std::array<bool, 3> output_mask) {
  TORCH_CHECK(weight.dim() == 2, "linear_backward: weight must be 2-D (out_features, in_features), got ",
              weight.dim(), "-D");
  at::Tensor grad_input, grad_weight, grad_bias;
  const at::Tensor rows = grad_output.reshape({-1, weight.size(0)});  // one row per position the weight was applied
  if (output_mask[0]) grad_input = at::matmul(grad_output, weight);
  if (output_mask[1]) grad_weight = at::mm(rows.t(), input.reshape({-1, weight.size(1)}));
  if (output_mask[2]) grad_bias = at::sum(rows, 0);
  return {grad_input, grad_weight, grad_bias};
}

// TorchNeuron registers this op (PyTorch's only kernel is MKLDNN's); its trackers list it as one op.
std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward(const at::Tensor& input, const at::Tensor& grad_output,
                                                               const at::Tensor& weight,
                                                               std::array<bool, 3> output_mask) {
  count_kernel_call(CountedKernel::LinearBackward);
  return linear_gradients(input, grad_output, weight, output_mask);
}

// Below autograd, without a second trip through the dispatcher's entry: the profiler records the call once.
at::Tensor linear_below_autograd(c10::DispatchKeySet keys, const at::Tensor& input, const at::Tensor& weight,
                                 const std::optional<at::Tensor>& bias) {
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return at::redispatch::linear(keys & c10::after_autograd_keyset, input, weight, bias);
}

struct Linear : public torch::autograd::Function<Linear> {
  static at::Tensor forward(AutogradContext* ctx, c10::DispatchKeySet keys, const at::Tensor& input,
                            const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
    ctx->save_for_backward({input, weight});
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return linear_below_autograd(keys, input, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    // indexed by the tensor arguments alone (an absent bias has no index)
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)};
    // create_graph: the gradients must be differentiable themselves, which linear_backward is not in PyTorch
    auto [grad_input, grad_weight, grad_bias] =
        at::GradMode::is_enabled() ? linear_gradients(saved[0], grads[0], saved[1], mask)
                                   : at::linear_backward(saved[0], grads[0], saved[1], mask);
    return {at::Tensor(), grad_input, grad_weight, grad_bias};  // the key set has no gradient
  }
};

bool needs_grad(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  if (!at::GradMode::is_enabled()) return false;
  return input.requires_grad() || weight.requires_grad() || (bias.has_value() && bias->defined() && bias->requires_grad());
}

at::Tensor linear_autograd(c10::DispatchKeySet keys, const at::Tensor& input, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias) {
  if (traced_or_transformed(input, weight, bias)) return at::native::linear(input, weight, bias);
  if (!needs_grad(input, weight, bias)) return linear_below_autograd(keys, input, weight, bias);
  // linear_backward's weight is a matrix; a vector weight (a dot product per row) keeps the composite's gradients
  if (weight.dim() != 2) return at::native::linear(input, weight, bias);
  return Linear::apply(keys, input, weight, bias);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("linear", linear_autograd); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  counted_impl(m, CountedKernel::LinearBackward, "linear_backward", linear_backward);
}

}  // namespace localneuron
