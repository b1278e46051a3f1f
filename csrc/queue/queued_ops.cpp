#include "queue/queued_ops.h"

#include "runtime/alias.h"
#include "runtime/allocator.h"
#include "executor/execution.h"
#include "fusion/fusion.h"
#include "queue/queue.h"
#include "executor/signature.h"

#include <ATen/EmptyTensor.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace localneuron {
namespace {

constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

struct TensorSpec {
  enum Kind : uint8_t { New, InPlace, Undefined, Int } kind = Undefined;
  int argument = -1;  // InPlace: the argument that is returned
  int64_t value = 0;  // Int: the policy promised ints that follow from the signature (sequence lengths)
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> sizes, strides;
};
struct ReturnSpec {
  bool is_list = false;
  std::vector<TensorSpec> tensors;
};
struct OutputSpec {
  bool queueable = false;
  std::vector<ReturnSpec> returns;
  int64_t new_bytes = 0;  // of the new tensors
  // The op's out= overload, when every result is a new tensor: queued work writes the outputs allocated at
  // enqueue directly instead of copying the functional kernel's results into them.
  std::optional<c10::OperatorHandle> out_op;
  mutable std::atomic<bool> out_failed{false};  // the out= kernel raised once: the functional one decides
};

std::shared_mutex g_specs_mutex;
std::unordered_map<uint64_t, std::unique_ptr<OutputSpec>> g_specs;

const OutputSpec* find_spec(uint64_t layout) {
  thread_local uint64_t keys[256] = {};
  thread_local const OutputSpec* values[256] = {};
  const size_t slot = layout & 255;
  if (keys[slot] == layout && values[slot] != nullptr) return values[slot];
  std::shared_lock<std::shared_mutex> lock(g_specs_mutex);
  auto it = g_specs.find(layout);
  if (it == g_specs.end()) return nullptr;
  keys[slot] = layout;
  values[slot] = it->second.get();
  return values[slot];
}

void store_spec(uint64_t layout, std::unique_ptr<OutputSpec> spec) {
  std::unique_lock<std::shared_mutex> lock(g_specs_mutex);
  g_specs.emplace(layout, std::move(spec));  // specs are never replaced: pointers to them stay valid
}

// Whether `t` has exactly the strides of a new contiguous tensor. is_contiguous() ignores the strides of size-1
// dimensions, but the CPU's kernels do not: a (2, 3, 1, 1) input laid out channels-last, which is also
// "contiguous", gives channels-last results.
bool default_strides(const at::Tensor& t) {
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();  // not t.size(d): it wraps and checks each dim
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (strides[d] != expected) return false;
    expected *= std::max<int64_t>(sizes[d], 1);
  }
  return true;
}

uint64_t mix_strides(uint64_t h, const at::Tensor& t) {
  if (!t.defined() || default_strides(t)) return h;
  for (int64_t s : t.strides()) h = mix(h, static_cast<uint64_t>(s) + 0x51);
  return h;
}

// Output layouts follow the signature and, for inputs not laid out as new contiguous tensors, their strides.
uint64_t layout_of(uint64_t key, const c10::IValue* begin, const c10::IValue* end) {
  uint64_t h = mix(key, 0x1a7e);
  for (const c10::IValue* v = begin; v != end; ++v) {
    if (v->isTensor()) {
      h = mix_strides(h, v->toTensor());
    } else if (v->isTensorList()) {
      for (const c10::IValue& e : v->toListRef()) h = mix_strides(h, e.toTensor());
    }
  }
  return h;
}

at::Tensor allocate(const TensorSpec& spec, c10::DeviceIndex device) {
  const CurrentDeviceScope scope(device);
  return at::detail::empty_strided_generic(spec.sizes, spec.strides, device_allocator(), kDeviceKeys, spec.dtype);
}

// Fills an output allocated at enqueue time (given as its host alias) from the host kernel's result.
void fill_output(const TensorSpec& spec, const at::Tensor& output, const at::Tensor& result, const char* op) {
  if (spec.kind != TensorSpec::New) return;  // in-place results were written through the input's alias
  TORCH_CHECK(result.defined() && result.sizes() == output.sizes(), op, " produced a result of shape ",
              result.defined() ? result.sizes() : c10::IntArrayRef{}, " where its first call produced ",
              output.sizes(), "; ops with data-dependent shapes must not be queued");
  output.copy_(result);
}

std::string describe_value(const c10::IValue& v) {
  std::ostringstream out;
  auto tensor = [&](const at::Tensor& t) {
    if (!t.defined()) {
      out << "None";
      return;
    }
    out << c10::toString(t.scalar_type()) << t.sizes();
  };
  if (v.isTensor()) {
    tensor(v.toTensor());
  } else if (v.isTensorList() || v.isList()) {  // a list of tensors, or of optional tensors (aten::index's indices)
    out << "[";
    bool first = true;
    for (const c10::IValue& e : v.toListRef()) {
      out << (first ? "" : ", ");
      if (e.isTensor()) {
        tensor(e.toTensor());
      } else if (e.isNone()) {
        out << "None";
      } else {
        out << e;
      }
      first = false;
    }
    out << "]";
  } else {
    out << v;
  }
  return out.str();
}

// Warnings kept back until it is known whether the run that raised them stands.
class HeldWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override { held_.push_back(warning); }
  void show(c10::WarningHandler* handler) const {
    for (const c10::Warning& w : held_) handler->process(w);
  }

 private:
  std::vector<c10::Warning> held_;
};

// The arguments are taken as host aliases when the op is enqueued, so what runs is what Python saw then,
// even if a tensor's storage is swapped before the worker gets to it (`param.data = ...`); the device
// storages are held weakly (queue.h: stream-ordered memory).
struct QueuedExecutable final : QueuedWork {
  c10::OperatorHandle op;
  const Executable& exe;
  const OutputSpec& spec;
  c10::DeviceIndex device;
  torch::jit::Stack host_arguments;
  std::vector<at::Tensor> host_outputs;  // one per TensorSpec, in order (undefined unless New)

  QueuedExecutable(c10::OperatorHandle o, const Executable& e, const OutputSpec& s, c10::DeviceIndex d)
      : op(std::move(o)), exe(e), spec(s), device(d) {}

  void run() override {
    const CurrentDeviceScope scope(device);
    if (!(spec.out_op && !spec.out_failed.load(std::memory_order_relaxed) && run_out())) run_functional();
    if (exe.route == Route::DeviceWrapInt64) {
      for (const at::Tensor& t : host_outputs) wrap_to_int32(t);
    }
  }

  // Whether the out= overload filled the outputs where they are. Should it raise, or resize or replace an
  // output (huber_loss's out= computes into a resized result; the outputs' storages are not resizable,
  // so that raises), the outputs are put back, the functional kernel runs instead (and raises the user's
  // error, if it is one) and the signature keeps to it. The out= run's warnings are shown only if it
  // stands: the functional run gives its own.
  bool run_out() {
    torch::jit::Stack stack(host_arguments.begin(), host_arguments.end());
    stack.insert(stack.end(), host_outputs.begin(), host_outputs.end());
    c10::SmallVector<c10::Storage, 2> storages;
    for (const at::Tensor& t : host_outputs) storages.push_back(t.storage());
    c10::WarningHandler* shown = c10::WarningUtils::get_warning_handler();
    HeldWarnings held;
    bool written = false;
    try {
      const c10::WarningUtils::WarningHandlerGuard guard(&held);
      spec.out_op->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
      written = outputs_intact(storages);
    } catch (const c10::Error&) {
    }
    if (written) {
      held.show(shown);
      return true;
    }
    spec.out_failed.store(true, std::memory_order_relaxed);
    for (size_t k = 0; k < host_outputs.size(); k++) {
      c10::TensorImpl* impl = host_outputs[k].unsafeGetTensorImpl();
      const TensorSpec& t = spec.returns[k].tensors[0];
      impl->set_storage_keep_dtype(storages[k]);
      impl->set_sizes_and_strides(t.sizes, t.strides, 0);
    }
    return false;
  }

  bool outputs_intact(const c10::SmallVector<c10::Storage, 2>& storages) const {
    for (size_t k = 0; k < host_outputs.size(); k++) {
      const TensorSpec& t = spec.returns[k].tensors[0];
      const at::Tensor& out = host_outputs[k];
      if (!out.storage().is_alias_of(storages[k]) || out.sizes() != c10::IntArrayRef(t.sizes) ||
          out.strides() != c10::IntArrayRef(t.strides) || out.storage_offset() != 0) {
        return false;
      }
    }
    return true;
  }

  void run_functional() {
    torch::jit::Stack stack(host_arguments.begin(), host_arguments.end());
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
    const char* name = op.schema().name().c_str();
    size_t next = 0;
    for (size_t i = 0; i < spec.returns.size(); i++) {
      const ReturnSpec& r = spec.returns[i];
      if (!r.is_list && r.tensors[0].kind == TensorSpec::Int) {
        next++;
        continue;
      }
      if (!r.is_list) {
        fill_output(r.tensors[0], host_outputs[next++], stack[i].toTensor(), name);
        continue;
      }
      const auto results = stack[i].toTensorList();
      TORCH_CHECK(results.size() == r.tensors.size(), name, " returned ", results.size(), " tensors, not ",
                  r.tensors.size());
      for (size_t j = 0; j < r.tensors.size(); j++) fill_output(r.tensors[j], host_outputs[next++], results[j], name);
    }
  }

  std::string describe() const override {
    return describe_call(op, std::vector<c10::IValue>(host_arguments.begin(), host_arguments.end()));
  }

  // Adaptive Eager: a device-route op whose results are all new tensors (the last storages held).
  bool fusible() const override {
    if (exe.route != Route::Device) return false;
    c10::SmallVector<const at::Tensor*, 8> operands;
    for (const c10::IValue& v : host_arguments) {
      if (!v.isTensor()) continue;
      // The run reads its operands as snapshots, which keep no lazy conj/neg bits.
      if (v.toTensor().defined() && !snapshot_is_exact(v.toTensor())) return false;
      operands.push_back(&v.toTensor());
    }
    if (!is_fusible_call(op, operands)) return false;
    for (const ReturnSpec& r : spec.returns) {
      if (r.is_list || r.tensors[0].kind != TensorSpec::New) return false;
    }
    return true;
  }

  // Built when a run is sealed, on the issuing thread.
  const FusibleCall* fusible_call() const override {
    if (fusible_call_) return &*fusible_call_;
    FusibleCall& call = fusible_call_.emplace();
    call.op = &op;
    for (const c10::IValue& v : host_arguments) {
      FusibleArgument& a = call.arguments.emplace_back();
      if (v.isTensor() && v.toTensor().defined() && !v.toTensor().unsafeGetTensorImpl()->is_wrapped_number()) {
        a.tensor.emplace(v.toTensor());
      } else {
        a.value = v;
      }
    }
    for (const at::Tensor& t : host_outputs) call.outputs.emplace_back(t);
    for (auto s = held.end() - static_cast<std::ptrdiff_t>(host_outputs.size()); s != held.end(); ++s) {
      call.output_storages.push_back(s->_unsafe_get_target());
    }
    return &call;
  }

 private:
  mutable std::optional<FusibleCall> fusible_call_;
};

// ATen's out= overload of `op` (name.out, or name.<overload>_out) when every result is one new tensor and it
// takes exactly the op's arguments followed by one written tensor per result.
std::optional<c10::OperatorHandle> out_overload(const c10::OperatorHandle& op, const OutputSpec& spec) {
  if (spec.returns.empty()) return std::nullopt;
  for (const ReturnSpec& r : spec.returns) {
    if (r.is_list || r.tensors[0].kind != TensorSpec::New) return std::nullopt;
  }
  const c10::FunctionSchema& schema = op.schema();
  const std::string& overload = schema.overload_name();
  const std::optional<c10::OperatorHandle> out =
      c10::Dispatcher::singleton().findOp({schema.name(), overload.empty() ? "out" : overload + "_out"});
  if (!out || !out->hasComputedKernelForDispatchKey(c10::DispatchKey::CPU)) return std::nullopt;
  const auto& arguments = schema.arguments();
  const auto& out_arguments = out->schema().arguments();
  if (out_arguments.size() != arguments.size() + schema.returns().size()) return std::nullopt;
  for (size_t i = 0; i < arguments.size(); i++) {
    if (arguments[i].name() != out_arguments[i].name() || *arguments[i].type() != *out_arguments[i].type()) {
      return std::nullopt;
    }
  }
  for (size_t i = arguments.size(); i < out_arguments.size(); i++) {
    const c10::AliasInfo* alias = out_arguments[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || *out_arguments[i].type() != *c10::TensorType::get()) return std::nullopt;
  }
  return out;
}

TensorSpec spec_of(const at::Tensor& t, const c10::SmallVector<c10::IValue, 8>& arguments,
                   std::vector<const c10::StorageImpl*>& seen, bool& queueable) {
  TensorSpec spec;
  if (!t.defined()) return spec;
  for (size_t k = 0; k < arguments.size(); k++) {
    if (arguments[k].isTensor() && arguments[k].toTensor().unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
      spec.kind = TensorSpec::InPlace;
      spec.argument = static_cast<int>(k);
      return spec;
    }
  }
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t exact = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.dtype().itemsize());
  // A new tensor of its own: not a view of an input or of another result, no spare bytes.
  queueable = queueable && t.is_privateuseone() && t.storage_offset() == 0 && storage->nbytes() == exact &&
              std::find(seen.begin(), seen.end(), storage) == seen.end();
  seen.push_back(storage);
  spec.kind = TensorSpec::New;
  spec.dtype = t.scalar_type();
  spec.sizes = t.sizes().vec();
  spec.strides = t.strides().vec();
  return spec;
}

}  // namespace

uint64_t layout_key(uint64_t key, const at::Tensor& a, const at::Tensor& b) {
  return mix_strides(mix_strides(mix(key, 0x1a7e), a), b);
}

at::Tensor allocate_binary_output(uint64_t layout, c10::DeviceIndex device) {
  const OutputSpec* spec = find_spec(layout);
  if (spec == nullptr || !spec->queueable || spec->returns.size() != 1 || spec->returns[0].is_list ||
      spec->returns[0].tensors[0].kind != TensorSpec::New) {
    return at::Tensor();
  }
  return allocate(spec->returns[0].tensors[0], device);
}

bool returns_first_argument(uint64_t layout) {
  const OutputSpec* spec = find_spec(layout);
  return spec != nullptr && spec->queueable && spec->returns.size() == 1 && !spec->returns[0].is_list &&
         spec->returns[0].tensors[0].kind == TensorSpec::InPlace && spec->returns[0].tensors[0].argument == 0;
}

std::string describe_call(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments) {
  std::string out = op.schema().name() + "(";
  for (size_t i = 0; i < arguments.size(); i++) out += (i ? ", " : "") + describe_value(arguments[i]);
  return out + ")";
}

namespace {

// Pushes the results a queued call hands to Python: its in-place inputs, and new tensors allocated
// per the spec (filled when the work runs). With `work`, records what the work must fill and hold.
void push_results(const OutputSpec& spec, const std::vector<c10::IValue>& arguments, c10::DeviceIndex device,
                  Route route, torch::jit::Stack* stack, QueuedExecutable* work) {
  auto output = [&](const TensorSpec& t) -> at::Tensor {
    at::Tensor result, host;
    if (t.kind == TensorSpec::InPlace) {
      result = arguments[t.argument].toTensor();
      if (route == Route::DeviceWrapInt64) host = cpu_alias(result);
    } else if (t.kind == TensorSpec::New) {
      result = allocate(t, device);
      host = cpu_alias(result);
      host.storage().unsafeGetStorageImpl()->set_resizable(false);  // QueuedExecutable::run_out
      if (work != nullptr) work->hold(result.storage());
    }
    if (work != nullptr) work->host_outputs.push_back(host);
    return result;
  };
  for (const ReturnSpec& r : spec.returns) {
    if (r.is_list) {
      c10::List<at::Tensor> list;
      for (const TensorSpec& t : r.tensors) list.push_back(output(t));
      stack->emplace_back(std::move(list));
    } else if (r.tensors[0].kind == TensorSpec::Int) {
      if (work != nullptr) work->host_outputs.emplace_back();
      stack->emplace_back(r.tensors[0].value);
    } else {
      stack->emplace_back(output(r.tensors[0]));
    }
  }
}

int64_t nbytes_of(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

int64_t tensor_bytes(const c10::IValue* begin, const c10::IValue* end) {
  int64_t bytes = 0;
  for (const c10::IValue* v = begin; v != end; ++v) {
    if (v->isTensor()) {
      bytes += nbytes_of(v->toTensor());
    } else if (v->isTensorList()) {
      for (const c10::IValue& e : v->toListRef()) bytes += nbytes_of(e.toTensor());
    }
  }
  return bytes;
}

}  // namespace

Enqueued enqueue_executable(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin,
                            const Executable& exe, uint64_t key, WorkScope& trace) {
  const OutputSpec* spec = find_spec(layout_of(key, stack->data() + begin, stack->data() + stack->size()));
  if (spec == nullptr) return Enqueued::UnknownOutputs;
  if (!spec->queueable) return Enqueued::NotQueueable;
  const c10::DeviceIndex device = device_of(*stack, begin);
  const int64_t bytes = tensor_bytes(stack->data() + begin, stack->data() + stack->size()) + spec->new_bytes;
  if (!runs_may_form() && runs_in_place(device, bytes, &exe)) return Enqueued::RunInPlace;
  auto work = std::make_unique<QueuedExecutable>(op, exe, *spec, device);
  work->executable = const_cast<Executable*>(&exe);
  const std::vector<c10::IValue> arguments(stack->begin() + begin, stack->end());
  work->host_arguments.assign(std::make_move_iterator(stack->begin() + begin), std::make_move_iterator(stack->end()));
  stack->resize(begin);
  HostArguments host = to_host_arguments(&work->host_arguments, 0);
  for (const AliasedInput& in : host.inputs) work->hold(in.device_tensor.storage());
  push_results(*spec, arguments, device, exe.route, stack, work.get());
  work->launch = trace.hand_off();
  run_or_enqueue(device, std::move(work), bytes);
  return Enqueued::Yes;
}

void hold_in_place_failure(const c10::OperatorHandle& op, const c10::SmallVector<c10::IValue, 8>& arguments,
                           torch::jit::Stack* stack, size_t begin, const Executable& exe, uint64_t key,
                           const std::exception& error) {
  const OutputSpec* spec = find_spec(layout_of(key, arguments.begin(), arguments.end()));
  TORCH_INTERNAL_ASSERT(spec != nullptr && spec->queueable, "an op ran in place without a queueable output spec");
  const std::vector<c10::IValue> args(arguments.begin(), arguments.end());
  const c10::DeviceIndex device = device_of(*stack, begin);
  stack->resize(begin);
  push_results(*spec, args, device, exe.route, stack, nullptr);
  hold_in_place_error(device, describe_call(op, args), error);
}

void learn_outputs(const c10::OperatorHandle& op, const c10::SmallVector<c10::IValue, 8>& arguments,
                   const torch::jit::Stack& stack, uint64_t key) {
  auto spec = std::make_unique<OutputSpec>();
  spec->queueable = true;
  std::vector<const c10::StorageImpl*> seen;
  for (const c10::IValue& a : arguments) {
    if (a.isTensor() && a.toTensor().defined()) seen.push_back(a.toTensor().storage().unsafeGetStorageImpl());
  }
  const size_t nreturns = op.schema().returns().size();
  for (size_t i = stack.size() - nreturns; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    ReturnSpec r;
    if (v.isTensor()) {
      r.tensors.push_back(spec_of(v.toTensor(), arguments, seen, spec->queueable));
    } else if (v.isTensorList()) {
      r.is_list = true;
      for (const c10::IValue& e : v.toListRef()) r.tensors.push_back(spec_of(e.toTensor(), arguments, seen, spec->queueable));
    } else if (v.isInt()) {
      TensorSpec t;
      t.kind = TensorSpec::Int;
      t.value = v.toInt();
      r.tensors.push_back(t);
    } else {
      spec->queueable = false;
    }
    spec->returns.push_back(std::move(r));
  }
  for (const ReturnSpec& r : spec->returns) {
    for (const TensorSpec& t : r.tensors) {
      if (t.kind == TensorSpec::New) {
        spec->new_bytes += static_cast<int64_t>(
            at::detail::computeStorageNbytes(t.sizes, t.strides, c10::elementSize(t.dtype)));
      }
    }
  }
  spec->out_op = out_overload(op, *spec);
  store_spec(layout_of(key, arguments.begin(), arguments.end()), std::move(spec));
}

void forget_outputs(const c10::OperatorHandle&, const c10::SmallVector<c10::IValue, 8>& arguments, uint64_t key) {
  store_spec(layout_of(key, arguments.begin(), arguments.end()), std::make_unique<OutputSpec>());
}

}  // namespace localneuron
