#include "executor.h"

#include "alias.h"
#include "device_state.h"
#include "generator.h"
#include "line_sampler.h"
#include "operand_devices.h"
#include "trace_plugin.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

namespace py = pybind11;

namespace localneuron {
namespace {

struct Executable {
  Route route;
  int64_t id;
  int64_t estimated_ns;  // per call on the simulated target, for the report's time by source line
  int generator_arg;  // position of an optional Generator argument, or -1
  std::atomic<int64_t> calls{0};
};

std::shared_mutex g_cache_mutex;
std::unordered_map<uint64_t, std::unique_ptr<Executable>> g_cache;
std::atomic<uint64_t> g_cache_generation{1};  // bumped when executables are discarded

// Per-thread direct-mapped copy of the cache so that a hit takes no lock.
struct ThreadCache {
  static constexpr size_t kSlots = 1024;
  uint64_t generation = 0;
  uint64_t keys[kSlots] = {};
  Executable* values[kSlots] = {};

  Executable* find(uint64_t key) {
    if (generation != g_cache_generation.load(std::memory_order_relaxed)) return nullptr;
    const size_t slot = key & (kSlots - 1);
    return keys[slot] == key ? values[slot] : nullptr;
  }
  void put(uint64_t key, Executable* exe) {
    const uint64_t current = g_cache_generation.load(std::memory_order_relaxed);
    if (generation != current) {
      std::fill(std::begin(keys), std::end(keys), 0);
      generation = current;
    }
    const size_t slot = key & (kSlots - 1);
    keys[slot] = key;
    values[slot] = exe;
  }
};
thread_local ThreadCache t_cache;
std::atomic<int64_t> g_hits{0}, g_misses{0};

struct Callbacks {
  py::object on_miss, run_python, on_device_failure;
};
Callbacks* g_callbacks = nullptr;  // process lifetime; never destroyed after interpreter shutdown

std::unique_ptr<torch::Library> g_fallback_library, g_composite_library, g_fast_library;
// Set while a Python route re-issues its op with prepared arguments: run them on the device.
thread_local bool t_device_route_only = false;

inline uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

inline uint64_t tensor_signature(uint64_t h, const at::Tensor& t) {
  if (!t.defined()) return mix(h, 0x5bd1e995);
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  h = mix(h, static_cast<uint64_t>(impl->dtype().toScalarType()) << 16 |
                 static_cast<uint64_t>(impl->device_type()) << 8 | static_cast<uint64_t>(impl->dim()));
  for (int64_t s : impl->sizes()) h = mix(h, static_cast<uint64_t>(s));
  return mix(h, impl->is_contiguous() ? 1 : 2);
}

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
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      h = e.isTensor() ? tensor_signature(h, e.toTensor()) : mix(h, static_cast<uint64_t>(e.tagKind().size()));
    }
    return h;
  }
  if (v.isDevice()) return mix(h, static_cast<uint64_t>(v.toDevice().type()) * 131 + 7);
  return mix(h, static_cast<uint64_t>(v.tagKind().size()) + 17);
}

// The signature an executable is compiled for: op, tensor dtypes/shapes/layout and the values of the
// non-tensor arguments that shape the program (ints, bools, dtypes...). Floating-point scalars are
// runtime operands, so only their presence counts.
uint64_t signature(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin) {
  uint64_t h = reinterpret_cast<uint64_t>(&op.schema());
  for (size_t i = begin; i < stack.size(); i++) h = value_signature(h, stack[i]);
  return h;
}

int find_generator_arg(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); i++) {
    const c10::TypePtr& t = args[i].real_type();
    if (t->kind() == c10::TypeKind::OptionalType &&
        t->expectRef<c10::OptionalType>().getElementType()->kind() == c10::TypeKind::GeneratorType) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Enum arguments (dtype, layout, memory_format) travel as ints on the stack; give Python its enums.
py::object to_python(const c10::IValue& value, const c10::TypePtr& declared) {
  c10::TypePtr type = declared;
  if (type->kind() == c10::TypeKind::OptionalType) type = type->expectRef<c10::OptionalType>().getElementType();
  if (value.isInt()) {
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return py::cast(static_cast<at::ScalarType>(value.toInt()));
      case c10::TypeKind::LayoutType:
        return py::cast(static_cast<at::Layout>(value.toInt()));
      case c10::TypeKind::MemoryFormatType:
        return py::cast(static_cast<at::MemoryFormat>(value.toInt()));
      default:
        break;
    }
  }
  if (value.isTensor()) {
    // toPyObject would turn a wrapped number (a Python scalar inside a composite op) back into an int.
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(value.toTensor()));
  }
  return torch::jit::toPyObject(value);
}

std::pair<py::tuple, py::dict> to_python_args(const c10::FunctionSchema& schema, const torch::jit::Stack& stack,
                                              size_t begin) {
  const auto& args = schema.arguments();
  py::list positional;
  py::dict keywords;
  for (size_t i = 0; i < args.size(); i++) {
    py::object value = to_python(stack[begin + i], args[i].real_type());
    if (args[i].kwarg_only()) keywords[py::str(args[i].name())] = value;
    else positional.append(value);
  }
  return {py::tuple(positional), keywords};
}

void push_python_result(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const py::object& result) {
  const auto& returns = schema.returns();
  if (returns.empty()) return;
  if (returns.size() == 1) {
    stack->push_back(torch::jit::toIValue(result, returns[0].real_type()));
    return;
  }
  const auto items = result.cast<py::sequence>();
  TORCH_INTERNAL_ASSERT(items.size() == returns.size(), schema.name(), ": expected ", returns.size(), " results");
  for (size_t i = 0; i < returns.size(); i++) stack->push_back(torch::jit::toIValue(items[i], returns[i].real_type()));
}

// Runs a Python-side routine for `op` with the arguments on the stack, leaving its results there.
void call_python(const py::object& fn, py::object extra_first, const c10::OperatorHandle& op,
                 torch::jit::Stack* stack, size_t begin, const char* message = nullptr) {
  const auto& schema = op.schema();
  py::gil_scoped_acquire gil;
  auto [args, kwargs] = to_python_args(schema, *stack, begin);
  py::object py_op = py::reinterpret_borrow<py::object>(torch::detail::getTorchApiFunction(op));
  py::object result = message ? fn(extra_first, py_op, args, kwargs, py::str(message))
                              : fn(extra_first, py_op, args, kwargs);
  torch::jit::drop(*stack, schema.arguments().size());
  push_python_result(schema, stack, result);
}

Executable* compile(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin, uint64_t key) {
  TORCH_CHECK(g_callbacks != nullptr, "localneuron executor used before the Python runtime was set up");
  Route route;
  int64_t id, estimated_ns;
  {
    py::gil_scoped_acquire gil;
    auto [args, kwargs] = to_python_args(op.schema(), *stack, begin);
    py::object py_op = py::reinterpret_borrow<py::object>(torch::detail::getTorchApiFunction(op));
    auto decided = g_callbacks->on_miss(py_op, args, kwargs).cast<std::tuple<int, int64_t, int64_t>>();
    route = static_cast<Route>(std::get<0>(decided));
    id = std::get<1>(decided);
    estimated_ns = std::get<2>(decided);
  }
  auto exe = std::make_unique<Executable>();
  exe->route = route;
  exe->id = id;
  exe->estimated_ns = estimated_ns;
  exe->generator_arg = find_generator_arg(op.schema());
  std::unique_lock<std::shared_mutex> lock(g_cache_mutex);
  auto [it, inserted] = g_cache.emplace(key, std::move(exe));
  return it->second.get();
}

struct CurrentDeviceScope {
  c10::DeviceIndex saved;
  explicit CurrentDeviceScope(c10::DeviceIndex d) : saved(current_device()) {
    if (d != saved) set_current_device(d);
  }
  ~CurrentDeviceScope() {
    if (current_device() != saved) set_current_device(saved);
  }
};

struct AliasedInput {
  at::Tensor device_tensor;
  at::Tensor alias;
};

// Runs the op's host kernel on aliases of its device tensors and maps the results back.
void run_on_device(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin, const Executable& exe) {
  const auto& schema = op.schema();
  c10::SmallVector<AliasedInput, 8> inputs;
  c10::DeviceIndex device = -1;
  auto to_alias = [&](const at::Tensor& t, size_t index) -> at::Tensor {
    if (!t.defined()) return t;
    if (t.is_privateuseone()) {
      if (device < 0) device = t.device().index();
      at::Tensor a = cpu_alias(t);
      inputs.push_back({t, a});
      return a;
    }
    return t;
  };
  for (size_t i = begin; i < stack->size(); i++) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = to_alias(v.toTensor(), i - begin);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); j++) list[j] = to_alias(list[j], i - begin);
    } else if (v.isOptionalTensorList()) {
      auto list = v.toOptionalTensorList();
      for (size_t j = 0; j < list.size(); j++) {
        std::optional<at::Tensor> o = list[j];
        if (o.has_value()) list[j] = to_alias(*o, i - begin);
      }
    } else if (v.isDevice() && v.toDevice().is_privateuseone()) {
      if (device < 0) device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
      v = c10::IValue(c10::Device(c10::DeviceType::CPU));
    } else if (v.isGenerator() && v.toGenerator().device().is_privateuseone()) {
      v = c10::IValue(host_twin(v.toGenerator()));
    }
  }
  if (device < 0) device = current_device();
  if (exe.generator_arg >= 0) {
    c10::IValue& g = (*stack)[begin + exe.generator_arg];
    if (g.isNone()) g = c10::IValue(host_twin(default_generator(device)));
  }
  const CurrentDeviceScope scope(device);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  c10::SmallVector<std::pair<const c10::StorageImpl*, at::Tensor>, 4> adopted;
  auto to_device = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined() || !r.is_cpu()) return r;
    for (auto& in : inputs) {
      if (r.unsafeGetTensorImpl() == in.alias.unsafeGetTensorImpl()) {  // in-place or out=
        sync_back(in.device_tensor, in.alias);
        return in.device_tensor;
      }
    }
    const c10::StorageImpl* storage = r.storage().unsafeGetStorageImpl();
    for (auto& in : inputs) {
      if (storage == in.alias.storage().unsafeGetStorageImpl()) return view_like(in.device_tensor, r);
    }
    for (auto& [s, t] : adopted) {
      if (storage == s) return view_like(t, r);
    }
    at::Tensor result = adopt(r, device);
    adopted.emplace_back(storage, result);
    return result;
  };
  for (size_t i = stack->size() - schema.returns().size(); i < stack->size(); i++) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = to_device(v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); j++) list[j] = to_device(list[j]);
    }
  }
}

void wrap_to_int32(const at::Tensor& t) {
  if (t.defined() && t.scalar_type() == at::kLong) {
    at::Tensor host = cpu_alias(t);
    host.copy_(host.to(at::kInt));
  }
}

void wrap_int64_results(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  for (size_t i = stack->size() - op.schema().returns().size(); i < stack->size(); i++) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      wrap_to_int32(v.toTensor());
    } else if (v.isTensorList()) {
      for (const c10::IValue& e : v.toListRef()) wrap_to_int32(e.toTensor());
    }
  }
}

// The device an op runs on, for the trace: its first neuron tensor's, else the current device.
int stack_device(const torch::jit::Stack& stack, size_t begin) {
  for (size_t i = begin; i < stack.size(); i++) {
    if (stack[i].isTensor() && stack[i].toTensor().is_privateuseone()) return stack[i].toTensor().device().index();
  }
  return current_device();
}

void execute(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  const size_t begin = stack->size() - nargs;
  const uint64_t key = signature(op, *stack, begin);
  WorkScope work(Work::Executable);
  Executable* exe = t_cache.find(key);
  if (exe == nullptr) {
    std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      exe = it->second.get();
      t_cache.put(key, exe);
    }
  }
  if (exe != nullptr) {
    g_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    check_operand_devices(op, *stack, begin, /*refuse_host=*/false);  // no executable for what cannot run
    g_misses.fetch_add(1, std::memory_order_relaxed);
    exe = compile(op, stack, begin, key);
    t_cache.put(key, exe);
    work.compiled();
  }
  const bool python_route = exe->route == Route::Python && !t_device_route_only;
  check_operand_devices(op, *stack, begin, /*refuse_host=*/!python_route);
  exe->calls.fetch_add(1, std::memory_order_relaxed);
  note_device_time(exe->estimated_ns);
  if (work.on()) work.describe(exe->id, stack_device(*stack, begin));
  if (python_route) {
    call_python(g_callbacks->run_python, py::int_(exe->id), op, stack, begin);
    return;
  }
  // Kept so that a failing device execution can be retried or reported with the original arguments.
  c10::SmallVector<c10::IValue, 8> original(stack->begin() + begin, stack->end());
  try {
    run_on_device(op, stack, begin, *exe);
    if (exe->route == Route::DeviceWrapInt64) wrap_int64_results(op, stack);
  } catch (const c10::OutOfMemoryError&) {
    throw;  // the device is full: running the op on the host instead would not change that
  } catch (const c10::Error& e) {
    stack->resize(begin);
    stack->insert(stack->end(), original.begin(), original.end());
    call_python(g_callbacks->on_device_failure, py::int_(exe->id), op, stack, begin, e.what_without_backtrace());
  }
}

// Unboxed entry points for the hottest element-wise ops. They share the executables, counters and
// policy of the boxed path; a cache hit on the device route just skips boxing the arguments.
struct FastOp {
  const char* name;
  const char* overload;
  std::optional<c10::OperatorHandle> handle;
};
FastOp g_fast_alpha_ops[] = {{"aten::add", "Tensor", {}}, {"aten::sub", "Tensor", {}}};
FastOp g_fast_plain_ops[] = {{"aten::mul", "Tensor", {}}, {"aten::div", "Tensor", {}}};

using AlphaSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);
using PlainSignature = at::Tensor(const at::Tensor&, const at::Tensor&);

Executable* cached_device_executable(const c10::OperatorHandle& op, const at::Tensor& a, const at::Tensor& b,
                                     const c10::IValue* alpha) {
  if (!a.is_privateuseone() || !b.is_privateuseone() || a.device() != b.device()) return nullptr;
  uint64_t h = reinterpret_cast<uint64_t>(&op.schema());
  h = tensor_signature(tensor_signature(h, a), b);
  if (alpha != nullptr) h = value_signature(h, *alpha);
  Executable* exe = t_cache.find(h);
  return exe != nullptr && exe->route == Route::Device ? exe : nullptr;
}

template <typename Run>
at::Tensor run_fast(Executable& exe, const at::Tensor& a, const at::Tensor& b, Run&& host_op) {
  g_hits.fetch_add(1, std::memory_order_relaxed);
  exe.calls.fetch_add(1, std::memory_order_relaxed);
  note_device_time(exe.estimated_ns);
  const c10::DeviceIndex device = a.device().index();
  WorkScope work(Work::Executable);
  work.describe(exe.id, device);
  const at::Tensor ha = cpu_alias(a), hb = cpu_alias(b);
  const CurrentDeviceScope scope(device);
  at::Tensor r = host_op(ha, hb);
  const c10::StorageImpl* rs = r.storage().unsafeGetStorageImpl();
  if (rs == ha.storage().unsafeGetStorageImpl()) return view_like(a, r);
  if (rs == hb.storage().unsafeGetStorageImpl()) return view_like(b, r);
  return adopt(r, device);
}

at::Tensor run_boxed(const c10::OperatorHandle& op, torch::jit::Stack stack) {
  execute(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
  return stack.back().toTensor();
}

template <int K>
at::Tensor fast_alpha_kernel(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  const c10::OperatorHandle& op = *g_fast_alpha_ops[K].handle;
  const c10::IValue boxed_alpha(alpha);
  if (Executable* exe = cached_device_executable(op, a, b, &boxed_alpha)) {
    return run_fast(*exe, a, b, [&](const at::Tensor& x, const at::Tensor& y) {
      return op.typed<AlphaSignature>().redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), x, y, alpha);
    });
  }
  return run_boxed(op, {a, b, boxed_alpha});
}

template <int K>
at::Tensor fast_plain_kernel(const at::Tensor& a, const at::Tensor& b) {
  const c10::OperatorHandle& op = *g_fast_plain_ops[K].handle;
  if (Executable* exe = cached_device_executable(op, a, b, nullptr)) {
    return run_fast(*exe, a, b, [&](const at::Tensor& x, const at::Tensor& y) {
      return op.typed<PlainSignature>().redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), x, y);
    });
  }
  return run_boxed(op, {a, b});
}

void install_fast_kernels(torch::Library& library) {
  for (FastOp& f : g_fast_alpha_ops) f.handle = c10::Dispatcher::singleton().findSchemaOrThrow(f.name, f.overload);
  for (FastOp& f : g_fast_plain_ops) f.handle = c10::Dispatcher::singleton().findSchemaOrThrow(f.name, f.overload);
  library.impl("add.Tensor", TORCH_FN(fast_alpha_kernel<0>));
  library.impl("sub.Tensor", TORCH_FN(fast_alpha_kernel<1>));
  library.impl("mul.Tensor", TORCH_FN(fast_plain_kernel<0>));
  library.impl("div.Tensor", TORCH_FN(fast_plain_kernel<1>));
}

}  // namespace

void set_executor_callbacks(py::object on_miss, py::object run_python, py::object on_device_failure) {
  if (g_callbacks == nullptr) g_callbacks = new Callbacks();
  g_callbacks->on_miss = std::move(on_miss);
  g_callbacks->run_python = std::move(run_python);
  g_callbacks->on_device_failure = std::move(on_device_failure);
}

bool set_device_route_only(bool on) {
  const bool previous = t_device_route_only;
  t_device_route_only = on;
  return previous;
}

void install_executor() {
  if (g_fallback_library) return;
  g_fallback_library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1,
                                                        __FILE__, __LINE__);
  g_fallback_library->fallback(torch::CppFunction::makeFromBoxedFunction<&execute>());
  g_fast_library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                                    __FILE__, __LINE__);
  install_fast_kernels(*g_fast_library);
}

void route_whole(const std::string& op_name) {
  if (!g_composite_library) {
    g_composite_library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                           c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  }
  g_composite_library->impl(op_name.c_str(), torch::CppFunction::makeFromBoxedFunction<&execute>());
}

ExecutorCounters executor_counters() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  return {g_hits.load(), g_misses.load(), static_cast<int64_t>(g_cache.size())};
}

std::vector<std::tuple<int64_t, int64_t>> executable_calls() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  std::vector<std::tuple<int64_t, int64_t>> out;
  for (auto& [key, exe] : g_cache) {
    const int64_t n = exe->calls.load();
    if (n > 0) out.emplace_back(exe->id, n);
  }
  return out;
}

void reset_executable_calls() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  for (auto& [key, exe] : g_cache) exe->calls = 0;
  g_hits = 0;
  g_misses = 0;
}

void clear_executables() {
  std::unique_lock<std::shared_mutex> lock(g_cache_mutex);
  g_cache_generation++;
  g_cache.clear();
}

}  // namespace localneuron
