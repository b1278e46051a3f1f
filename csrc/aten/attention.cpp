// Scaled dot-product attention as TorchNeuron runs it: one fused op
// (_scaled_dot_product_fused_attention_overrideable, the backend hook PyTorch leaves to devices), not
// PyTorch's unfused math path, for grouped key/value heads and value heads of another size too. The host
// computes it with its flash-attention kernel.
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace localneuron {
namespace {

bool fused_dtype(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf;
}

// What the fused op covers (TorchNeuron's: multi-head, grouped-query and multi-query heads, causal or masked,
// value heads of another size than the query/key heads); everything else keeps PyTorch's math path, which
// also raises PyTorch's errors for shapes that do not fit.
int64_t choose_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool, std::optional<double>,
                       bool enable_gqa) {
  const bool four_d = query.dim() == 4 && key.dim() == 4 && value.dim() == 4;
  const bool fused = dropout_p == 0.0 && four_d && query.scalar_type() == key.scalar_type() &&
                     query.scalar_type() == value.scalar_type() && fused_dtype(query.scalar_type()) &&
                     query.size(0) == key.size(0) && key.size(0) == value.size(0) && key.size(1) == value.size(1) &&
                     key.size(2) == value.size(2) && query.size(3) == key.size(3) && key.size(1) > 0 &&
                     (query.size(1) == key.size(1) || (enable_gqa && query.size(1) % key.size(1) == 0)) &&
                     (!attn_mask.has_value() || !attn_mask->defined() || !attn_mask->requires_grad());
  return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

// The layouts the op's meta kernel promises (compiled graphs assert them): a result of its input's shape laid out
// like that input; the output, of the query's shape but for the value's head size, in the query's dimension
// order.
at::Tensor laid_out_like(const at::Tensor& reference, const at::Tensor& value) {
  at::Tensor result;
  if (value.sizes() == reference.sizes()) {
    if (value.strides() == reference.strides()) return value;
    result = at::empty_like(reference, value.options());
  } else {
    std::vector<int64_t> order(reference.dim());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return reference.stride(a) > reference.stride(b); });
    std::vector<int64_t> strides(reference.dim());
    int64_t stride = 1;
    for (auto d = order.rbegin(); d != order.rend(); ++d) {
      strides[*d] = stride;
      stride *= value.size(*d);
    }
    if (value.strides() == c10::IntArrayRef(strides)) return value;
    result = at::empty_strided(value.sizes(), strides, value.options());
  }
  result.copy_(value);
  return result;
}

// The host's flash kernel takes one key/value head per query head and one head size for all three. Grouped
// key/value heads are repeated for their query heads (their gradients summed back); the narrower of the
// query/key and value head sizes is padded with zeros, which adds exact zeros to every dot product and leaves
// zero columns in the output that are cut off. Sums can run in another order than on narrower heads (the
// results stay within the attention tolerance of tests/support/sweep_compare.py, not bit for bit).
struct FlashOperands {
  int64_t groups, qk_size, v_size, width;

  FlashOperands(const at::Tensor& query, const at::Tensor& value)
      : groups(query.size(1) / value.size(1)), qk_size(query.size(-1)), v_size(value.size(-1)),
        width(std::max(qk_size, v_size)) {}

  bool plain() const { return groups == 1 && qk_size == v_size; }
  at::Tensor widened(const at::Tensor& t) const {
    return t.size(-1) == width ? t : at::constant_pad_nd(t, {0, width - t.size(-1)});
  }
  at::Tensor per_query_head(const at::Tensor& t) const {
    return groups == 1 ? t : t.repeat_interleave(groups, 1);
  }
  at::Tensor kv(const at::Tensor& t) const { return widened(per_query_head(t)); }
  // The query/key scale when the heads are padded: PyTorch's default is 1/sqrt(query head size).
  std::optional<double> scale(std::optional<double> given) const {
    return given.has_value() || qk_size == width ? given : std::optional<double>(1.0 / std::sqrt(double(qk_size)));
  }
  at::Tensor cut(const at::Tensor& t, int64_t size) const { return t.size(-1) == size ? t : t.narrow(-1, 0, size); }
  // The gradient of a key/value repeated for its query heads: the sum over the group, rounded once.
  at::Tensor per_kv_head(const at::Tensor& t) const {
    if (groups == 1) return t;
    return t.view({t.size(0), t.size(1) / groups, groups, t.size(2), t.size(3)}).sum(2, false, at::kFloat).to(t.scalar_type());
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal, bool,
                std::optional<double> scale) {
  const FlashOperands flash(query, value);
  auto [out, logsumexp] =
      flash.plain()
          ? at::_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, attn_bias, scale)
          : at::_scaled_dot_product_flash_attention_for_cpu(flash.widened(query), flash.kv(key), flash.kv(value),
                                                           dropout_p, is_causal, attn_bias, flash.scale(scale));
  const auto seed = [&] { return at::empty({}, query.options().dtype(at::kLong)); };
  return {laid_out_like(query, flash.cut(out, flash.v_size)), logsumexp.contiguous(), at::Tensor(), at::Tensor(),
          c10::SymInt(query.size(2)), c10::SymInt(key.size(2)), seed(), seed(), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4>, const at::Tensor& out, const at::Tensor& logsumexp,
    const at::Tensor&, const at::Tensor&, c10::SymInt, c10::SymInt, double dropout_p, bool is_causal,
    const at::Tensor&, const at::Tensor&, std::optional<double> scale) {
  const std::optional<at::Tensor> mask = attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt;
  const FlashOperands flash(query, value);
  at::Tensor gq, gk, gv;
  if (flash.plain()) {
    std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, mask, scale);
  } else {
    std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        flash.widened(grad_out), flash.widened(query), flash.kv(key), flash.kv(value), flash.widened(out),
        logsumexp, dropout_p, is_causal, mask, flash.scale(scale));
    gq = flash.cut(gq, flash.qk_size);
    gk = flash.per_kv_head(flash.cut(gk, flash.qk_size));
    gv = flash.per_kv_head(flash.cut(gv, flash.v_size));
  }
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
