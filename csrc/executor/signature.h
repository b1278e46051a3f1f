// The cache key of an eager op: which executable a call runs.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>

namespace localneuron {

// Combines a hash with a value; every bit of both reaches every bit of the result (splitmix64's finalizer).
// The combiner this replaced (boost's hash_combine) sent 6% of two-tensor signatures over small shapes to
// another's key, so an op could be handed the executable or the output layout of another signature.
inline uint64_t mix(uint64_t h, uint64_t v) {
  uint64_t x = (h * 0x9e3779b97f4a7c15ULL) ^ v;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t tensor_signature(uint64_t h, const at::Tensor& t) {
  if (!t.defined()) return mix(h, 0x5bd1e995);
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  h = mix(h, static_cast<uint64_t>(impl->dtype().toScalarType()) << 16 |
                 static_cast<uint64_t>(impl->device_type()) << 8 | static_cast<uint64_t>(impl->dim()));
  for (int64_t s : impl->sizes()) h = mix(h, static_cast<uint64_t>(s));
  return mix(h, impl->is_contiguous() ? 1 : 2);
}

uint64_t value_signature(uint64_t h, const c10::IValue& v);

// The signature an executable is compiled for, over the op's arguments stack[begin:]. See
// executor_contract.h for what it covers and, deliberately, what it does not.
uint64_t signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin);

}  // namespace localneuron
