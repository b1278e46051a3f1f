// Unboxed entry points for the hottest element-wise ops. They share the executables, counters and
// policy of the boxed path; a cache hit on the device route just skips boxing the arguments. A call
// whose executable is not cached, not on the device route, or whose operands are not all on one
// device (a Python number as the second operand excepted) takes the boxed path, which decides.
#include "runtime/alias.h"
#include "executor/executor.h"
#include "fusion/fusion.h"
#include "profiler/line_sampler.h"
#include "executor/execution.h"
#include "queue/queue.h"
#include "queue/queued_ops.h"
#include "executor/signature.h"
#include "profiler/trace_plugin.h"

#include <torch/library.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include <optional>
#include <utility>

namespace localneuron {
namespace {

// The argument lists an entry point takes, in schema order. A functional form has an out= overload of the same
// arguments followed by `out`, which queued and in-place runs call on the output allocated at issue; an in-place
// form (BinaryInPlace, BinaryAlphaInPlace: self, other[, alpha]) writes into its first argument, and its runs call
// the op itself on the host alias of that argument.
enum class Form { Unary, TensorScalar, Binary, BinaryAlpha, BinaryInPlace, BinaryAlphaInPlace };

bool writes_first_argument(Form form) { return form == Form::BinaryInPlace || form == Form::BinaryAlphaInPlace; }
bool has_second_tensor(Form form) { return form != Form::Unary && form != Form::TensorScalar; }
bool has_scalar(Form form) {
  return form == Form::TensorScalar || form == Form::BinaryAlpha || form == Form::BinaryAlphaInPlace;
}

// The ops themselves are the op records' `fast` fields (localneuron/ops/op_records.py), handed down at
// registration (set_fast_ops) before install_fast_ops registers their kernels; here only the forms.
struct FastOpName {
  std::string name;  // "aten::add"
  std::string overload;
  std::string out_overload;
  Form form;
};

Form parse_form(const std::string& op, const std::string& form) {
  if (form == "unary") return Form::Unary;
  if (form == "tensor_scalar") return Form::TensorScalar;
  if (form == "binary") return Form::Binary;
  if (form == "binary_alpha") return Form::BinaryAlpha;
  if (form == "binary_in_place") return Form::BinaryInPlace;
  if (form == "binary_alpha_in_place") return Form::BinaryAlphaInPlace;
  TORCH_CHECK(false, "the fast op ", op, " has the unknown form '", form,
              "' (its op record's `fast` field); the forms are unary, tensor_scalar, binary, binary_alpha, "
              "binary_in_place and binary_alpha_in_place");
}

// The kernels are templates on their slot, so each reaches its op without a lookup; the records may name
// at most this many fast ops.
constexpr size_t kMaxFastOps = 24;
std::vector<FastOpName> g_fast_op_names;

struct FastOp {
  const FastOpName* name;
  c10::OperatorHandle handle, out;
};
std::optional<FastOp> g_fast_ops[kMaxFastOps];
std::unique_ptr<torch::Library> g_fast_library;

using UnaryOut = at::Tensor&(const at::Tensor&, at::Tensor&);
using TensorScalarOut = at::Tensor&(const at::Tensor&, const at::Scalar&, at::Tensor&);
using BinaryOut = at::Tensor&(const at::Tensor&, const at::Tensor&, at::Tensor&);
using BinaryAlphaOut = at::Tensor&(const at::Tensor&, const at::Tensor&, const at::Scalar&, at::Tensor&);
using BinaryInPlace = at::Tensor&(at::Tensor&, const at::Tensor&);
using BinaryAlphaInPlace = at::Tensor&(at::Tensor&, const at::Tensor&, const at::Scalar&);

// One call's operands: `b` is undefined for the one-tensor forms, `scalar` is alpha or the exponent.
struct Operands {
  const at::Tensor& a;
  const at::Tensor& b;
  const at::Scalar* scalar;
};

// A Python number turned into a tensor by the binding (x * 0.5): it stays on the host, as the boxed
// path leaves it, and its value is not part of the signature (signature.h).
bool is_python_number(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->is_wrapped_number() && t.is_cpu() && t.dim() == 0;
}

Executable* cached_device_executable(const FastOp& fast, const Operands& x, uint64_t* key) {
  if (!x.a.is_privateuseone()) return nullptr;
  uint64_t h = tensor_signature(reinterpret_cast<uint64_t>(&fast.handle.schema()), x.a);
  if (x.b.defined()) {
    if (!(x.b.is_privateuseone() && x.b.device() == x.a.device()) && !is_python_number(x.b)) return nullptr;
    h = tensor_signature(h, x.b);
  }
  if (x.scalar != nullptr) h = scalar_signature(h, c10::IValue(*x.scalar));
  *key = h = finish_signature(h);
  Executable* exe = find_executable(h);
  return exe != nullptr && exe->route == Route::Device && !exe->writes_strided ? exe : nullptr;
}

// The op's out= overload on host tensors, into `out`; an in-place form's op itself, on `out` (the host alias of its
// first argument, `a`'s bytes).
void run_out(const FastOp& fast, const at::Tensor& a, const at::Tensor& b, const std::optional<at::Scalar>& scalar,
             at::Tensor& out) {
  const auto cpu = c10::DispatchKeySet(c10::DispatchKey::CPU);
  switch (fast.name->form) {
    case Form::Unary:
      fast.out.typed<UnaryOut>().redispatch(cpu, a, out);
      return;
    case Form::TensorScalar:
      fast.out.typed<TensorScalarOut>().redispatch(cpu, a, *scalar, out);
      return;
    case Form::Binary:
      fast.out.typed<BinaryOut>().redispatch(cpu, a, b, out);
      return;
    case Form::BinaryAlpha:
      fast.out.typed<BinaryAlphaOut>().redispatch(cpu, a, b, *scalar, out);
      return;
    case Form::BinaryInPlace:
      fast.out.typed<BinaryInPlace>().redispatch(cpu, out, b);
      return;
    case Form::BinaryAlphaInPlace:
      fast.out.typed<BinaryAlphaInPlace>().redispatch(cpu, out, b, *scalar);
      return;
  }
}

// The boxed arguments of a call on host tensors, in schema order.
std::vector<c10::IValue> boxed_arguments(const FastOp& fast, const at::Tensor& a, const at::Tensor& b,
                                         const std::optional<at::Scalar>& scalar) {
  std::vector<c10::IValue> args{a};
  if (b.defined()) args.emplace_back(b);
  if (scalar) args.emplace_back(*scalar);
  return args;
}

// A queued call: the host kernel's out= overload writes into the output allocated at enqueue. The call
// is recorded as a fused run reads it: device operands as snapshots (as they are at enqueue, see
// QueuedExecutable for why), so a fused run builds no host tensor and takes no copy of it; an op run
// unfused makes its host aliases where it runs, so the thread that allocates them frees them. The device
// storages are held weakly, the output's last.
struct QueuedFastOp final : QueuedWork {
  const FastOp& fast;
  FusibleCall call;  // arguments in schema order: a, then b (a device operand or a Python number), then the scalar
  bool fusible_;
  QueuedFastOp(const FastOp& f, const Operands& x, const at::Tensor& o) : fast(f), fusible_(runs_may_form()) {
    call.op = &fast.handle;
    call.arguments.emplace_back().tensor.emplace(x.a);
    if (x.b.defined()) {
      FusibleArgument& b = call.arguments.emplace_back();
      if (x.b.is_privateuseone()) {
        b.tensor.emplace(x.b);
      } else {
        b.value = x.b;
      }
    }
    if (x.scalar != nullptr) call.arguments.emplace_back().value = *x.scalar;
    call.outputs.emplace_back(o);
    if (fusible_) {
      const at::Tensor* operands[] = {&x.a, &x.b};
      fusible_ = is_fusible_call(fast.handle, operands);
    }
    hold(x.a.storage());
    if (x.b.defined() && x.b.is_privateuseone()) hold(x.b.storage());
    hold(o.storage());
    call.output_storages.push_back(held.back()._unsafe_get_target());
  }
  static at::Tensor host_tensor(const FusibleArgument& a) { return a.tensor ? cpu_alias(*a.tensor) : a.value.toTensor(); }
  // The host kernel's arguments: aliases of the device operands.
  void host_arguments(at::Tensor* a, at::Tensor* b, std::optional<at::Scalar>* scalar) const {
    const Form form = fast.name->form;
    *a = host_tensor(call.arguments[0]);
    if (has_second_tensor(form)) *b = host_tensor(call.arguments[1]);
    if (has_scalar(form)) *scalar = call.arguments.back().value.toScalar();
  }
  void run() override {
    at::Tensor a, b, out = cpu_alias(call.outputs[0]);
    std::optional<at::Scalar> scalar;
    host_arguments(&a, &b, &scalar);
    run_out(fast, a, b, scalar, out);
  }
  std::string describe() const override {
    at::Tensor a, b;
    std::optional<at::Scalar> scalar;
    host_arguments(&a, &b, &scalar);
    return describe_call(fast.handle, boxed_arguments(fast, a, b, scalar));
  }
  bool fusible() const override { return fusible_; }
  const FusibleCall* fusible_call() const override { return &call; }
};

// Queues the call, or runs it in place as queued work would run (queue.h kRunInPlaceMaxNs), when its
// output layout is known (an in-place form's output is its first argument, once the boxed path has seen a call of
// this layout return it); an undefined result means: take the boxed path.
at::Tensor try_queue(const FastOp& fast, Executable& exe, uint64_t key, const Operands& x) {
  if (exe.execution != Execution::Queued || issuer_needs_own_thread()) return at::Tensor();
  // Queued work records its device operands as snapshots, which need bytes and keep no lazy bits.
  if (!snapshot_is_exact(x.a) || (x.b.defined() && x.b.is_privateuseone() && !snapshot_is_exact(x.b))) {
    return at::Tensor();
  }
  const c10::DeviceIndex device = x.a.device().index();
  const bool in_place = writes_first_argument(fast.name->form);
  const uint64_t layout = layout_key(key, x.a, x.b);
  at::Tensor out = in_place ? (returns_first_argument(layout) ? x.a : at::Tensor())
                            : allocate_binary_output(layout, device);
  if (!out.defined()) return out;
  count_hit();
  exe.calls.fetch_add(1, std::memory_order_relaxed);
  note_device_time(exe.estimated_ns);
  WorkScope trace(Work::Executable);
  trace.describe(exe.id, device);
  const int64_t bytes =
      static_cast<int64_t>(x.a.nbytes() + (x.b.defined() ? x.b.nbytes() : 0) + (in_place ? 0 : out.nbytes()));
  if (!runs_may_form() && runs_in_place(device, bytes, &exe)) {
    // Nothing is queued on the stream: the call runs now, without building its queue entry.
    const at::Tensor ha = cpu_alias(x.a), hb = cpu_alias(x.b);
    at::Tensor hout = cpu_alias(out);
    std::optional<at::Scalar> scalar;
    if (x.scalar != nullptr) scalar = *x.scalar;
    try {
      const HostTimer timer(&exe);
      run_out(fast, ha, hb, scalar, hout);
    } catch (const std::exception& e) {
      hold_in_place_error(device, describe_call(fast.handle, boxed_arguments(fast, ha, hb, scalar)), e);
    }
    return out;
  }
  auto work = std::make_unique<QueuedFastOp>(fast, x, out);
  work->executable = &exe;
  work->launch = trace.hand_off();
  run_or_enqueue(device, std::move(work), bytes);
  return out;
}

// NEURON_LAUNCH_BLOCKING=1 (or a worker's own ops): the functional host kernel, its result adopted.
template <typename HostOp>
at::Tensor run_now(Executable& exe, const Operands& x, HostOp&& host_op) {
  count_hit();
  exe.calls.fetch_add(1, std::memory_order_relaxed);
  note_device_time(exe.estimated_ns);
  const c10::DeviceIndex device = x.a.device().index();
  WorkScope work(Work::Executable);
  work.describe(exe.id, device);
  const at::Tensor ha = cpu_alias(x.a), hb = cpu_alias(x.b);
  const CurrentDeviceScope scope(device);
  at::Tensor r = host_op(ha, hb);
  const c10::StorageImpl* rs = r.storage().unsafeGetStorageImpl();
  if (rs == ha.storage().unsafeGetStorageImpl()) return view_like(x.a, r);
  if (hb.defined() && x.b.is_privateuseone() && rs == hb.storage().unsafeGetStorageImpl()) return view_like(x.b, r);
  return adopt(r, device);
}

// The call through the executor's boxed kernel, which decides (compiles, learns outputs, falls back); its result.
at::Tensor run_boxed(const FastOp& fast, const Operands& x) {
  torch::jit::Stack stack;
  for (c10::IValue& v : boxed_arguments(fast, x.a, x.b, x.scalar ? std::optional<at::Scalar>(*x.scalar) : std::nullopt)) {
    stack.push_back(std::move(v));
  }
  execute(fast.handle, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
  return stack.back().toTensor();
}

template <typename HostOp>
at::Tensor call(const FastOp& fast, const Operands& x, HostOp&& host_op) {
  uint64_t key;
  if (Executable* exe = cached_device_executable(fast, x, &key)) {
    if (runs_inline()) return run_now(*exe, x, host_op);
    at::Tensor out = try_queue(fast, *exe, key, x);
    if (out.defined()) return out;
  }
  return run_boxed(fast, x);
}

constexpr c10::DispatchKeySet kCpu(c10::DispatchKey::CPU);

template <size_t K>
at::Tensor unary_kernel(const at::Tensor& a) {
  const FastOp& fast = *g_fast_ops[K];
  return call(fast, {a, at::Tensor(), nullptr}, [&](const at::Tensor& x, const at::Tensor&) {
    return fast.handle.typed<at::Tensor(const at::Tensor&)>().redispatch(kCpu, x);
  });
}

template <size_t K>
at::Tensor tensor_scalar_kernel(const at::Tensor& a, const at::Scalar& s) {
  const FastOp& fast = *g_fast_ops[K];
  return call(fast, {a, at::Tensor(), &s}, [&](const at::Tensor& x, const at::Tensor&) {
    return fast.handle.typed<at::Tensor(const at::Tensor&, const at::Scalar&)>().redispatch(kCpu, x, s);
  });
}

template <size_t K>
at::Tensor binary_kernel(const at::Tensor& a, const at::Tensor& b) {
  const FastOp& fast = *g_fast_ops[K];
  return call(fast, {a, b, nullptr}, [&](const at::Tensor& x, const at::Tensor& y) {
    return fast.handle.typed<at::Tensor(const at::Tensor&, const at::Tensor&)>().redispatch(kCpu, x, y);
  });
}

template <size_t K>
at::Tensor binary_alpha_kernel(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  const FastOp& fast = *g_fast_ops[K];
  return call(fast, {a, b, &alpha}, [&](const at::Tensor& x, const at::Tensor& y) {
    return fast.handle.typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>().redispatch(
        kCpu, x, y, alpha);
  });
}

// An in-place form: the fast path unless the write must run at the call (it overlaps what it reads: the boxed path
// runs it there); returns `self`, as in-place ops do.
template <typename HostOp>
at::Tensor& call_in_place(const FastOp& fast, at::Tensor& self, const Operands& x, HostOp&& host_op) {
  uint64_t key;
  if (!write_must_run_at_call(self, x.b)) {
    if (Executable* exe = cached_device_executable(fast, x, &key)) {
      if (runs_inline()) {
        run_now(*exe, x, host_op);
        return self;
      }
      if (try_queue(fast, *exe, key, x).defined()) return self;
    }
  }
  run_boxed(fast, x);
  return self;
}

template <size_t K>
at::Tensor& binary_in_place_kernel(at::Tensor& self, const at::Tensor& other) {
  const FastOp& fast = *g_fast_ops[K];
  return call_in_place(fast, self, {self, other, nullptr}, [&](const at::Tensor& x, const at::Tensor& y) {
    at::Tensor host = x;
    return fast.handle.typed<BinaryInPlace>().redispatch(kCpu, host, y);
  });
}

template <size_t K>
at::Tensor& binary_alpha_in_place_kernel(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const FastOp& fast = *g_fast_ops[K];
  return call_in_place(fast, self, {self, other, &alpha}, [&](const at::Tensor& x, const at::Tensor& y) {
    at::Tensor host = x;
    return fast.handle.typed<BinaryAlphaInPlace>().redispatch(kCpu, host, y, alpha);
  });
}

template <size_t K>
void register_fast_op(torch::Library& library, size_t slot) {
  if (slot != K) return;
  const FastOpName& op = g_fast_op_names[K];
  c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
  g_fast_ops[K] = FastOp{&op, dispatcher.findSchemaOrThrow(op.name.c_str(), op.overload.c_str()),
                         dispatcher.findSchemaOrThrow(op.name.c_str(), op.out_overload.c_str())};
  const std::string name = op.name.substr(6) + (op.overload.empty() ? "" : "." + op.overload);
  switch (op.form) {
    case Form::Unary:
      library.impl(name.c_str(), TORCH_FN(unary_kernel<K>));
      return;
    case Form::TensorScalar:
      library.impl(name.c_str(), TORCH_FN(tensor_scalar_kernel<K>));
      return;
    case Form::Binary:
      library.impl(name.c_str(), TORCH_FN(binary_kernel<K>));
      return;
    case Form::BinaryAlpha:
      library.impl(name.c_str(), TORCH_FN(binary_alpha_kernel<K>));
      return;
    case Form::BinaryInPlace:
      library.impl(name.c_str(), TORCH_FN(binary_in_place_kernel<K>));
      return;
    case Form::BinaryAlphaInPlace:
      library.impl(name.c_str(), TORCH_FN(binary_alpha_in_place_kernel<K>));
      return;
  }
}

template <size_t... K>
void register_fast_op_in_slot(torch::Library& library, size_t slot, std::index_sequence<K...>) {
  (register_fast_op<K>(library, slot), ...);
}

}  // namespace

void set_fast_ops(const std::vector<std::tuple<std::string, std::string, std::string, std::string>>& ops) {
  std::vector<FastOpName> names;
  for (const auto& [name, overload, out_overload, form] : ops) {
    TORCH_CHECK(name.rfind("aten::", 0) == 0, "a fast op is an aten op, not ", name);
    names.push_back({name, overload, out_overload, parse_form(name, form)});
  }
  TORCH_CHECK(g_fast_op_names.empty() && !g_fast_library, "the fast ops are already installed (once per process)");
  TORCH_CHECK(names.size() <= kMaxFastOps, "the op records name ", names.size(),
              " fast ops; csrc/executor/fast_ops.cpp has ", kMaxFastOps, " slots (raise kMaxFastOps)");
  g_fast_op_names = std::move(names);
}

std::vector<std::string> fast_op_names() {
  std::vector<std::string> names;
  for (size_t k = 0; k < g_fast_op_names.size(); k++) {
    const FastOpName& op = g_fast_op_names[k];
    if (g_fast_ops[k]) names.push_back(op.name + (op.overload.empty() ? "" : "." + op.overload));
  }
  return names;
}

void install_fast_ops() {
  g_fast_library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                                    __FILE__, __LINE__);
  for (size_t slot = 0; slot < g_fast_op_names.size(); slot++) {
    register_fast_op_in_slot(*g_fast_library, slot, std::make_index_sequence<kMaxFastOps>{});
  }
}

}  // namespace localneuron
