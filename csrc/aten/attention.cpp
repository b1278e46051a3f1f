// Scaled dot-product attention as TorchNeuron runs it: one fused op
// (_scaled_dot_product_fused_attention_overrideable, the backend hook PyTorch leaves to devices), not
// PyTorch's unfused math path. The host computes it with its flash-attention kernel.
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace localneuron {
namespace {

bool fused_dtype(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf;
}

// What the host's flash kernel covers; everything else keeps PyTorch's math path.
int64_t choose_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool, std::optional<double>,
                       bool enable_gqa) {
  const bool fused = dropout_p == 0.0 && !enable_gqa && query.dim() == 4 && key.dim() == 4 && value.dim() == 4 &&
                     query.scalar_type() == key.scalar_type() && query.scalar_type() == value.scalar_type() &&
                     fused_dtype(query.scalar_type()) && query.size(1) == key.size(1) &&
                     (!attn_mask.has_value() || !attn_mask->defined() || !attn_mask->requires_grad());
  return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

// The op's meta kernel promises these layouts (compiled graphs assert them): outputs laid out like the
// query (or the input they are the gradient of), logsumexp contiguous.
at::Tensor laid_out_like(const at::Tensor& reference, const at::Tensor& value) {
  if (value.sizes() != reference.sizes() || value.strides() == reference.strides()) return value;
  at::Tensor result = at::empty_like(reference, value.options());
  result.copy_(value);
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal, bool,
                std::optional<double> scale) {
  auto [out, logsumexp] = at::_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal,
                                                                           attn_bias, scale);
  const auto seed = [&] { return at::empty({}, query.options().dtype(at::kLong)); };
  return {laid_out_like(query, out), logsumexp.contiguous(), at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)),
          c10::SymInt(key.size(2)), seed(), seed(), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4>, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor&, const at::Tensor&, c10::SymInt, c10::SymInt, double dropout_p, bool is_causal,
    const at::Tensor&, const at::Tensor&, std::optional<double> scale) {
  const std::optional<at::Tensor> mask = attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt;
  auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, mask, scale);
  // the mask never requires grad here (choose_backend)
  return {laid_out_like(query, gq), laid_out_like(key, gk), laid_out_like(value, gv), at::Tensor()};
}

}  // namespace

// Host implementations: the executor runs the device op on host aliases through these.
TORCH_LIBRARY_IMPL(aten, CPU, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
}

}  // namespace localneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &localneuron::choose_backend)
}  // namespace at::native
