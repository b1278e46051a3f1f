#include "executor/signature.h"

#include <c10/util/Exception.h>

#include <unordered_map>
#include <unordered_set>

namespace localneuron {
namespace {

// Written once, before any op runs (set_ops_shaped_by_scalars), then only read.
std::unordered_set<std::string> g_ops_shaped_by_scalars;

// Whether the op of `schema` is shaped by its Scalars, remembered per schema (schemas live as long as their
// operator): looking the name up hashes the whole string, which every call with an int or bool Scalar argument
// (alpha of add_, ...) would pay on the per-op path. Per thread, so no lock.
bool shaped_by_scalars(const c10::FunctionSchema& schema) {
  thread_local std::unordered_map<const c10::FunctionSchema*, bool> known;
  const auto found = known.find(&schema);
  if (found != known.end()) return found->second;
  const bool shaped = g_ops_shaped_by_scalars.count(schema.name()) > 0;
  known.emplace(&schema, shaped);
  return shaped;
}

enum : uint64_t { kNone = 0x70, kBool = 0xb0, kInt = 0x10, kFloat = 0xd0, kComplex = 0xc0, kString = 0x57 };

uint64_t kind_of(const c10::IValue& v) {
  if (v.isNone()) return kNone;
  if (v.isBool()) return kBool;
  if (v.isInt() || v.isSymInt()) return kInt;
  if (v.isDouble() || v.isSymFloat()) return kFloat;
  if (v.isComplexDouble()) return kComplex;
  if (v.isString()) return kString;
  return static_cast<uint64_t>(std::hash<std::string>{}(v.tagKind()));
}

// Whether values of this schema type are Scalars (Scalar, Scalar?, Scalar[]).
bool holds_scalars(const c10::TypePtr& type) {
  const c10::Type* t = type.get();
  if (t->kind() == c10::TypeKind::OptionalType) t = t->castRaw<c10::OptionalType>()->getElementType().get();
  if (t->kind() == c10::TypeKind::ListType) t = t->castRaw<c10::ListType>()->getElementType().get();
  return t->kind() == c10::TypeKind::NumberType;
}

uint64_t value_signature(uint64_t h, const c10::IValue& v, bool scalar) {
  if (v.isTensor()) return tensor_signature(h, v.toTensor());
  if (v.isInt() && !scalar) return mix(h, static_cast<uint64_t>(v.toInt()) * 3 + 1);
  if (v.isBool() && !scalar) return mix(h, v.toBool() ? 11 : 13);
  if (v.isDevice()) return mix(h, static_cast<uint64_t>(v.toDevice().type()) * 131 + 7);
  if (v.isIntList() && !scalar) {
    const c10::List<int64_t> list = v.toIntList();
    h = mix(h, list.size() + 0x11);
    for (int64_t x : list) h = mix(h, static_cast<uint64_t>(x));
    return h;
  }
  if (v.isList()) {  // tensor, bool, optional-tensor and Scalar lists
    const c10::ArrayRef<c10::IValue> list = v.toListRef();
    h = mix(h, list.size() + 0x12);
    for (const c10::IValue& e : list) h = value_signature(h, e, scalar);
    return h;
  }
  return mix(h, kind_of(v));
}

}  // namespace

uint64_t scalar_signature(uint64_t h, const c10::IValue& v) { return mix(h, kind_of(v)); }

uint64_t signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin) {
  const c10::FunctionSchema& schema = op.schema();
  const std::vector<c10::Argument>& arguments = schema.arguments();
  uint64_t h = reinterpret_cast<uint64_t>(&schema);
  bool scalars_set_shape = false, checked = false;
  for (size_t i = begin; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    bool scalar = false;
    // Only ints, bools and their lists are keyed differently as Scalars; the schema is read for them alone.
    if ((v.isInt() || v.isBool() || v.isList()) && i - begin < arguments.size() &&
        holds_scalars(arguments[i - begin].type())) {
      if (!checked) {
        scalars_set_shape = shaped_by_scalars(schema);
        checked = true;
      }
      scalar = !scalars_set_shape;
    }
    h = value_signature(h, v, scalar);
  }
  return finish_signature(h);
}

void set_ops_shaped_by_scalars(const std::vector<std::string>& names) {
  TORCH_CHECK(g_ops_shaped_by_scalars.empty(), "the ops shaped by their Scalars are installed once per process");
  g_ops_shaped_by_scalars.insert(names.begin(), names.end());
}

}  // namespace localneuron
