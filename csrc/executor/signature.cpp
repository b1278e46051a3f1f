#include "executor/signature.h"

namespace localneuron {

// Floating-point scalars and strings are runtime operands of the program, not part of its shape, so
// only their presence counts (the tag's kind): `x * 0.5` and `x * 0.7` share one executable, as do
// div(..., rounding_mode="floor") and "trunc". Policy must therefore never decide a route from a float
// or a string value (ops/policy.py); tests/execution/test_executor_contract.py holds both sides to this.
uint64_t value_signature(uint64_t h, const c10::IValue& v) {
  if (v.isTensor()) return tensor_signature(h, v.toTensor());
  if (v.isInt()) return mix(h, static_cast<uint64_t>(v.toInt()) * 3 + 1);
  if (v.isBool()) return mix(h, v.toBool() ? 11 : 13);
  if (v.isTensorList()) {
    for (const c10::IValue& e : v.toListRef()) h = tensor_signature(h, e.toTensor());
    return h;
  }
  if (v.isIntList()) {
    for (int64_t x : v.toIntList()) h = mix(h, static_cast<uint64_t>(x));
    return h;
  }
  if (v.isList()) {  // bool lists (output masks) and optional-tensor lists, element by element
    for (const c10::IValue& e : v.toListRef()) h = value_signature(h, e);
    return h;
  }
  if (v.isDevice()) return mix(h, static_cast<uint64_t>(v.toDevice().type()) * 131 + 7);
  return mix(h, static_cast<uint64_t>(v.tagKind().size()) + 17);
}

uint64_t signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin) {
  uint64_t h = reinterpret_cast<uint64_t>(&op.schema());
  for (size_t i = begin; i < stack.size(); i++) h = value_signature(h, stack[i]);
  return h;
}

}  // namespace localneuron
