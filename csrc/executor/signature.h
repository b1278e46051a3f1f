// The cache key of an eager op: which executable a call runs and, queued, which output layout it gets.
//
// What a signature covers is the executor's contract (executor_contract.h): the policy may decide a route,
// and a queued op's outputs may be laid out, only from what is covered here, because every call with the
// same signature gets the decision and the layout of the first. It covers exactly what PyTorch's type
// promotion and shape rules read:
//  - the op (its schema);
//  - per tensor: dtype, device type, number of dimensions, sizes, contiguity, and whether it is a Python
//    number the binding wrapped (`x * 2.5`: promotion ranks it below a 0-dim tensor of the same dtype);
//  - per list (tensors, ints, bools, optional tensors): its length, then its elements;
//  - the values of int, SymInt, bool, dtype, layout, memory format and int-list arguments (shapes follow
//    them);
//  - of Scalar arguments (schema type Scalar) and float and string arguments: the kind only (bool, int,
//    float, complex, string, None). Their value never changes a result's dtype or shape, so `x * 0.5` and
//    `x * 0.7`, `clamp(x, min=i)` for every int i, div(..., rounding_mode="floor") and "trunc" share one
//    executable, each call computing with its own value. Except the Scalars of the ops installed with
//    set_ops_shaped_by_scalars (arange, range: their Scalars set the output's length), whose values count;
//  - the default dtype (torch.set_default_dtype): int and bool operands promote to it, Python floats take it.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DefaultDtype.h>

#include <cstdint>
#include <string>
#include <vector>

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
  h = mix(h, static_cast<uint64_t>(impl->is_wrapped_number()) << 32 |
                 static_cast<uint64_t>(impl->dtype().toScalarType()) << 16 |
                 static_cast<uint64_t>(impl->device_type()) << 8 | static_cast<uint64_t>(impl->dim()));
  for (int64_t s : impl->sizes()) h = mix(h, static_cast<uint64_t>(s));
  return mix(h, impl->is_contiguous() ? 1 : 2);
}

// A Scalar argument's part: its kind.
uint64_t scalar_signature(uint64_t h, const c10::IValue& v);

// The last part of every signature: the default dtype.
inline uint64_t finish_signature(uint64_t h) {
  return mix(h, static_cast<uint64_t>(c10::get_default_dtype_as_scalartype()) + 0xdd);
}

// The signature an executable is compiled for, over the op's arguments stack[begin:].
uint64_t signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin);

// The ops whose Scalar arguments set their output's shape ("aten::arange"): their Scalar values are part of
// their signatures. Installed once, with the executor, before any op runs.
void set_ops_shaped_by_scalars(const std::vector<std::string>& names);

}  // namespace localneuron
