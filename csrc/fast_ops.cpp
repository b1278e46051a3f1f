// Unboxed entry points for the hottest element-wise ops. They share the executables, counters and
// policy of the boxed path; a cache hit on the device route just skips boxing the arguments.
#include "alias.h"
#include "executor.h"
#include "fusion.h"
#include "line_sampler.h"
#include "execution.h"
#include "queue.h"
#include "queued_ops.h"
#include "signature.h"
#include "trace_plugin.h"

#include <torch/library.h>

#include <memory>
#include <optional>

namespace localneuron {
namespace {

struct FastOp {
  const char* name;
  const char* overload;
  std::optional<c10::OperatorHandle> handle, out;  // the op and its out= overload (queued runs)
};
FastOp g_fast_alpha_ops[] = {{"aten::add", "Tensor", {}, {}}, {"aten::sub", "Tensor", {}, {}}};
FastOp g_fast_plain_ops[] = {{"aten::mul", "Tensor", {}, {}}, {"aten::div", "Tensor", {}, {}}};
std::unique_ptr<torch::Library> g_fast_library;

using AlphaSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);
using PlainSignature = at::Tensor(const at::Tensor&, const at::Tensor&);
using AlphaOutSignature = at::Tensor&(const at::Tensor&, const at::Tensor&, const at::Scalar&, at::Tensor&);
using PlainOutSignature = at::Tensor&(const at::Tensor&, const at::Tensor&, at::Tensor&);

Executable* cached_device_executable(const c10::OperatorHandle& op, const at::Tensor& a, const at::Tensor& b,
                                     const c10::IValue* alpha, uint64_t* key) {
  if (!a.is_privateuseone() || !b.is_privateuseone() || a.device() != b.device()) return nullptr;
  uint64_t h = reinterpret_cast<uint64_t>(&op.schema());
  h = tensor_signature(tensor_signature(h, a), b);
  if (alpha != nullptr) h = value_signature(h, *alpha);
  *key = h;
  Executable* exe = find_executable(h);
  return exe != nullptr && exe->route == Route::Device ? exe : nullptr;
}

// A queued add/sub/mul/div: the host kernel's out= overload writes into the output allocated at
// enqueue. Host aliases are taken at enqueue (see QueuedExecutable); the storages are held weakly.
struct QueuedBinaryOp final : QueuedWork {
  const FastOp& fast;
  at::Tensor a, b, out;  // host aliases
  std::optional<at::Scalar> alpha;
  QueuedBinaryOp(const FastOp& f, const at::Tensor& x, const at::Tensor& y, const at::Tensor& o,
                 std::optional<at::Scalar> s)
      : fast(f), a(cpu_alias(x)), b(cpu_alias(y)), out(cpu_alias(o)), alpha(std::move(s)) {
    for (const at::Tensor* t : {&x, &y, &o}) hold(t->storage());
  }
  void run() override {
    const auto cpu = c10::DispatchKeySet(c10::DispatchKey::CPU);
    if (alpha) fast.out->typed<AlphaOutSignature>().redispatch(cpu, a, b, *alpha, out);
    else fast.out->typed<PlainOutSignature>().redispatch(cpu, a, b, out);
  }
  std::string describe() const override {
    std::vector<c10::IValue> args{a, b};
    if (alpha) args.emplace_back(*alpha);
    return describe_call(*fast.handle, args);
  }
  bool fusible() const override {
    const c10::IValue operands[] = {a, b};
    return is_fusible_call(*fast.handle, operands, 2);
  }
  FusibleCall fusible_call() const override {
    FusibleCall call;
    call.op = &*fast.handle;
    call.arguments = {a, b};
    if (alpha) call.arguments.emplace_back(*alpha);
    call.outputs = {out};
    call.output_storages = {held.back()._unsafe_get_target()};
    return call;
  }
};

// Queues the op when its output layout is known; an undefined result means: take the boxed path.
at::Tensor try_queue(const FastOp& fast, Executable& exe, uint64_t key, const at::Tensor& a, const at::Tensor& b,
                     std::optional<at::Scalar> alpha) {
  if (exe.execution != Execution::Queued || issuer_needs_own_thread()) return at::Tensor();
  const c10::DeviceIndex device = a.device().index();
  at::Tensor out = allocate_binary_output(layout_key(key, a, b), device);
  if (!out.defined()) return out;
  count_hit();
  exe.calls.fetch_add(1, std::memory_order_relaxed);
  note_device_time(exe.estimated_ns);
  WorkScope trace(Work::Executable);
  trace.describe(exe.id, device);
  auto work = std::make_unique<QueuedBinaryOp>(fast, a, b, out, std::move(alpha));
  work->launch = trace.hand_off();
  run_or_enqueue(device, std::move(work), static_cast<int64_t>(a.nbytes() + b.nbytes() + out.nbytes()));
  return out;
}

template <typename Run>
at::Tensor run_fast(Executable& exe, const at::Tensor& a, const at::Tensor& b, Run&& host_op) {
  count_hit();
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
  const FastOp& fast = g_fast_alpha_ops[K];
  const c10::OperatorHandle& op = *fast.handle;
  const c10::IValue boxed_alpha(alpha);
  uint64_t key;
  if (Executable* exe = cached_device_executable(op, a, b, &boxed_alpha, &key)) {
    if (!runs_inline()) {
      at::Tensor queued = try_queue(fast, *exe, key, a, b, alpha);
      return queued.defined() ? queued : run_boxed(op, {a, b, boxed_alpha});
    }
    return run_fast(*exe, a, b, [&](const at::Tensor& x, const at::Tensor& y) {
      return op.typed<AlphaSignature>().redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), x, y, alpha);
    });
  }
  return run_boxed(op, {a, b, boxed_alpha});
}

template <int K>
at::Tensor fast_plain_kernel(const at::Tensor& a, const at::Tensor& b) {
  const FastOp& fast = g_fast_plain_ops[K];
  const c10::OperatorHandle& op = *fast.handle;
  uint64_t key;
  if (Executable* exe = cached_device_executable(op, a, b, nullptr, &key)) {
    if (!runs_inline()) {
      at::Tensor queued = try_queue(fast, *exe, key, a, b, std::nullopt);
      return queued.defined() ? queued : run_boxed(op, {a, b});
    }
    return run_fast(*exe, a, b, [&](const at::Tensor& x, const at::Tensor& y) {
      return op.typed<PlainSignature>().redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), x, y);
    });
  }
  return run_boxed(op, {a, b});
}

}  // namespace

void install_fast_ops() {
  for (FastOp* group : {g_fast_alpha_ops, g_fast_plain_ops}) {
    for (FastOp* f = group; f != group + 2; ++f) {
      f->handle = c10::Dispatcher::singleton().findSchemaOrThrow(f->name, f->overload);
      f->out = c10::Dispatcher::singleton().findSchemaOrThrow(f->name, "out");
    }
  }
  g_fast_library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                                    __FILE__, __LINE__);
  g_fast_library->impl("add.Tensor", TORCH_FN(fast_alpha_kernel<0>));
  g_fast_library->impl("sub.Tensor", TORCH_FN(fast_alpha_kernel<1>));
  g_fast_library->impl("mul.Tensor", TORCH_FN(fast_plain_kernel<0>));
  g_fast_library->impl("div.Tensor", TORCH_FN(fast_plain_kernel<1>));
}

}  // namespace localneuron
