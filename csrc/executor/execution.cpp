#include "executor/execution.h"

#include "runtime/alias.h"
#include "runtime/allocator.h"
#include "executor/executor.h"
#include "profiler/line_sampler.h"
#include "executor/operand_devices.h"
#include "executor/python_bridge.h"
#include "queue/queue.h"
#include "queue/queued_ops.h"
#include "executor/signature.h"
#include "profiler/trace_plugin.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <cstdlib>
#include <memory>
#include <optional>

namespace localneuron {
namespace {

std::unique_ptr<torch::Library> g_fallback_library, g_composite_library;
// Set while a Python route re-issues its op with prepared arguments: run them on the device.
thread_local bool t_device_route_only = false;

// Replaces each tensor `v` holds (a tensor, or a list of them) by map(tensor); whether it held any. A list is
// replaced by a new one: the caller's list object is shared with the call's own arguments (a c10::List is a
// reference), and a retry of the call on the host (policy.on_device_failure) must see the device tensors, not the
// aliases of a failed attempt.
template <typename Map>
bool map_tensors(c10::IValue& v, Map&& map) {
  if (v.isTensor()) {
    v = map(v.toTensor());
    return true;
  }
  if (!v.isTensorList()) return false;
  const auto list = v.toTensorList();
  c10::List<at::Tensor> mapped;
  mapped.reserve(list.size());
  for (size_t j = 0; j < list.size(); j++) mapped.push_back(map(list[j]));
  v = c10::IValue(std::move(mapped));
  return true;
}

bool writes_repeated_elements(const at::Tensor& out) {
  // A contiguous tensor has no internal overlap: cheap to see, and it rules out the full check for almost every call.
  return !out.is_contiguous() && at::has_internal_overlap(out) == at::MemOverlap::Yes;
}

bool partly_overlaps(const at::Tensor& out, const at::Tensor& read) {
  // Tensors whose storages are not aliases cannot overlap partly: cheap to see, and it rules out the full check.
  return read.defined() && out.storage().is_alias_of(read.storage()) &&
         at::get_overlap_status(out, read) == at::MemOverlapStatus::Partial;
}

// The tensor argument i that the call writes (in place or out=), or nullptr.
const at::Tensor* written_tensor(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t begin,
                                 size_t i) {
  const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
  const c10::IValue& written = stack[begin + i];
  if (alias == nullptr || !alias->isWrite() || !written.isTensor() || !written.toTensor().defined()) return nullptr;
  return &written.toTensor();
}

// Whether the call writes into a tensor in a way that must run at the call (write_must_run_at_call) for any tensor
// argument it reads (the first call of a signature runs at the call, so only later calls need this; this runs on
// every in-place call).
bool overlapping_write(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t begin) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); i++) {
    const at::Tensor* written = written_tensor(schema, stack, begin, i);
    if (written == nullptr) continue;
    const at::Tensor& out = *written;
    if (writes_repeated_elements(out)) return true;
    for (size_t j = 0; j < args.size(); j++) {
      const c10::IValue& read = stack[begin + j];
      if (j != i && read.isTensor() && partly_overlaps(out, read.toTensor())) return true;
    }
  }
  return false;
}

// Whether the call writes (in place or out=) a tensor that is not contiguous; part of its signature (signature.h).
bool writes_strided(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t begin) {
  for (size_t i = 0; i < schema.arguments().size(); i++) {
    const at::Tensor* written = written_tensor(schema, stack, begin, i);
    if (written != nullptr && !written->is_contiguous()) return true;
  }
  return false;
}

Executable* compile(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin, uint64_t key) {
  Executable* exe = add_executable(key, decide_route(op, stack, begin));
  exe->writes_strided = exe->execution != Execution::Metadata && writes_strided(op.schema(), stack, begin);
  return exe;
}

// Runs the op's host kernel on aliases of its device tensors and maps the results back.
void run_on_device(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin, const Executable& exe) {
  const auto& schema = op.schema();
  HostArguments host = to_host_arguments(stack, begin);
  auto& inputs = host.inputs;
  const c10::DeviceIndex device = host.device;
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
  for (size_t i = stack->size() - schema.returns().size(); i < stack->size(); i++) map_tensors((*stack)[i], to_device);
}

// The bytes a host kernel failed to get from the CPU allocator (c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator:
// can't allocate memory: you tried to allocate N bytes. ..."), if that is what `e` says.
std::optional<size_t> failed_host_allocation(const c10::Error& e) {
  const std::string& message = e.msg();
  if (message.find("DefaultCPUAllocator: can't allocate memory") == std::string::npos) return std::nullopt;
  const std::string lead = "you tried to allocate ";
  const size_t at = message.find(lead);
  if (at == std::string::npos) return std::nullopt;
  const char* digits = message.c_str() + at + lead.size();
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(digits, &end, 10);
  if (end == digits) return std::nullopt;
  return static_cast<size_t>(bytes);
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

}  // namespace

bool write_must_run_at_call(const at::Tensor& out, const at::Tensor& read) {
  return writes_repeated_elements(out) || partly_overlaps(out, read);
}

HostArguments to_host_arguments(torch::jit::Stack* stack, size_t begin) {
  HostArguments host;
  c10::DeviceIndex& device = host.device;
  // Arguments that share a device tensor share its alias, and views of one device storage share one host
  // storage: a host kernel sees the aliasing the CPU would (an out= that is also an input, resized or
  // written while it is read, as im2col's and col2im's kernels do).
  auto to_alias = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !t.is_privateuseone()) return t;
    if (device < 0) device = t.device().index();
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    const AliasedInput* same_storage = nullptr;
    for (const AliasedInput& in : host.inputs) {
      if (in.device_tensor.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return in.alias;
      if (same_storage == nullptr && in.device_tensor.storage().unsafeGetStorageImpl() == storage) same_storage = &in;
    }
    at::Tensor a = cpu_alias(t);
    if (same_storage != nullptr && !t._is_zerotensor() && !same_storage->device_tensor._is_zerotensor()) {
      a.unsafeGetTensorImpl()->set_storage_keep_dtype(same_storage->alias.storage());
    }
    host.inputs.push_back({t, a});
    return a;
  };
  for (size_t i = begin; i < stack->size(); i++) {
    c10::IValue& v = (*stack)[i];
    if (map_tensors(v, to_alias)) continue;
    if (v.isOptionalTensorList()) {  // a new list, as map_tensors makes
      const auto list = v.toOptionalTensorList();
      c10::List<std::optional<at::Tensor>> mapped;
      mapped.reserve(list.size());
      for (size_t j = 0; j < list.size(); j++) {
        const std::optional<at::Tensor> o = list[j];
        mapped.push_back(o.has_value() ? std::optional<at::Tensor>(to_alias(*o)) : std::nullopt);
      }
      v = c10::IValue(std::move(mapped));
    } else if (v.isDevice() && v.toDevice().is_privateuseone()) {
      if (device < 0) device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
      v = c10::IValue(c10::Device(c10::DeviceType::CPU));
    }
  }
  if (device < 0) device = current_device();
  return host;
}

c10::DeviceIndex device_of(const torch::jit::Stack& stack, size_t begin) {
  for (size_t i = begin; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.is_privateuseone()) return t.device().index();
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && e.toTensor().is_privateuseone()) return e.toTensor().device().index();
      }
    } else if (v.isDevice() && v.toDevice().is_privateuseone() && v.toDevice().has_index()) {
      return v.toDevice().index();
    }
  }
  return current_device();
}

void wrap_to_int32(const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kLong) return;
  at::Tensor host = cpu_alias(t);  // itself when t is already a host alias
  if (host.is_contiguous()) {
    int64_t* values = host.mutable_data_ptr<int64_t>();
    // the conversion wraps modulo 2^32 (C++20; GCC and Clang did before)
    for (int64_t i = 0, n = host.numel(); i < n; i++) values[i] = static_cast<int32_t>(values[i]);
    return;
  }
  host.copy_(host.to(at::kInt));
}

void execute(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  const size_t begin = stack->size() - nargs;
  const uint64_t key = signature(op, *stack, begin);
  WorkScope work(Work::Executable);
  Executable* exe = find_executable(key);
  if (exe != nullptr) {
    count_hit();
  } else {
    check_operand_devices(op, *stack, begin, /*refuse_host=*/false);  // no executable for what cannot run
    count_miss();
    exe = compile(op, *stack, begin, key);
    work.compiled();
  }
  const bool python_route = exe->route == Route::Python && !t_device_route_only;
  check_operand_devices(op, *stack, begin, /*refuse_host=*/!python_route);
  if (exe->writes_strided) report_strided_write(op.schema());
  exe->calls.fetch_add(1, std::memory_order_relaxed);
  note_device_time(exe->estimated_ns);
  const c10::DeviceIndex device = device_of(*stack, begin);
  if (work.on()) work.describe(exe->id, device);
  const bool queues = !runs_inline();
  if (python_route) {
    if (queues) synchronize_device(device);  // Python reads device data
    run_python_route(exe->id, op, stack, begin);
    return;
  }
  bool learn = false, in_place = false;
  if (queues && exe->execution == Execution::Queued && !t_device_route_only && !issuer_needs_own_thread() &&
      !overlapping_write(op.schema(), *stack, begin)) {
    const Enqueued enqueued = enqueue_executable(op, stack, begin, *exe, key, work);
    if (enqueued == Enqueued::Yes) return;
    learn = enqueued == Enqueued::UnknownOutputs;
    in_place = enqueued == Enqueued::RunInPlace;  // nothing queued on the stream: no need to synchronise
  }
  if (queues && !in_place && exe->execution != Execution::Metadata) synchronize_device(device);
  // Kept so that a failing device execution can be retried or reported with the original arguments.
  c10::SmallVector<c10::IValue, 8> original(stack->begin() + begin, stack->end());
  try {
    {
      const HostTimer timer(exe->execution == Execution::Queued ? exe : nullptr);  // the queue's policy reads it
      run_on_device(op, stack, begin, *exe);
    }
    if (exe->route == Route::DeviceWrapInt64) wrap_int64_results(op, stack);
  } catch (const c10::OutOfMemoryError&) {
    throw;  // the device is full: running the op on the host instead would not change that
  } catch (const c10::Error& e) {
    // Results are made on the host, then adopted: a result too large for the host is the device's error.
    if (const std::optional<size_t> bytes = failed_host_allocation(e)) raise_host_kernel_out_of_memory(device, *bytes);
    stack->resize(begin);
    stack->insert(stack->end(), original.begin(), original.end());
    if (in_place) {
      hold_in_place_failure(op, original, stack, begin, *exe, key, e);
      return;
    }
    recover_device_failure(exe->id, op, stack, begin, e.what_without_backtrace());
    learn = false;
    forget_outputs(op, original, key);
  }
  if (learn) learn_outputs(op, original, *stack, key);
}

bool set_device_route_only(bool on) {
  const bool previous = t_device_route_only;
  t_device_route_only = on;
  return previous;
}

void install_executor(ExecutorCallbacks callbacks) {
  install_callbacks(std::move(callbacks));
  g_fallback_library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1,
                                                        __FILE__, __LINE__);
  g_fallback_library->fallback(torch::CppFunction::makeFromBoxedFunction<&execute>());
  install_fast_ops();
}

void route_whole(const std::string& op_name) {
  if (!g_composite_library) {
    g_composite_library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                           c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  }
  g_composite_library->impl(op_name.c_str(), torch::CppFunction::makeFromBoxedFunction<&execute>());
}

}  // namespace localneuron
