// The few ATen kernels a device must own in C++: allocation, metadata and views, copies and the
// refusals of features Neuron does not have. Every other op goes through the executor.
#include "aten/blocking_copies.h"
#include "aten/counted_impl.h"
#include "executor/executor.h"
#include "executor/execution.h"
#include "executor/python_bridge.h"
#include "runtime/alias.h"
#include "runtime/allocator.h"
#include "runtime/device_state.h"
#include "profiler/trace_plugin.h"
#include "queue/queue.h"
#include "queue/queued_ops.h"
#include "runtime/transfer_stats.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/contiguous_native.h>
#include <ATen/ops/new_empty_native.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>
#include <sstream>
#include <vector>

namespace localneuron {
namespace {

constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

std::atomic<int64_t> g_h2d{0}, g_d2h{0}, g_d2d{0}, g_copies{0};

// TorchNeuron's contiguous and _to_copy refuse the channels-last formats ("Neuron tensors only support contiguous or
// preserve memory format", source snapshot of 2026-04-21). Its contiguous, registered in C++, raises the refusal
// (csrc/ops/InternalOps.cpp's contiguous_internal); its _to_copy's Neuron implementation fails with it, so the call
// runs as a CPU fallback, or raises under TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 (the policy's
// on_kernel_refusal decides and accounts it; the device's memory is the host's, so the fallback's result is what
// the kernel then computes). Its other kernels (empty, empty_like, clone, resize_) keep the format.
std::optional<std::string> channels_last_refusal(const c10::OperatorHandle& op, std::optional<c10::MemoryFormat> format) {
  const auto f = format.value_or(c10::MemoryFormat::Contiguous);
  if (f != c10::MemoryFormat::ChannelsLast && f != c10::MemoryFormat::ChannelsLast3d) return std::nullopt;
  std::ostringstream reason;
  reason << op.schema().name() << ": Neuron tensors only support contiguous or preserve memory format (got " << f
         << ")";
  return reason.str();
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout>, std::optional<c10::Device> device,
                               std::optional<bool>, std::optional<c10::MemoryFormat> format) {
  count_kernel_call(CountedKernel::EmptyMemoryFormat);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_generic(size, device_allocator(), kDeviceKeys, c10::dtype_or_default(dtype),
                                   format);
}

at::Tensor to_copy(const at::Tensor& self, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                   std::optional<c10::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<c10::MemoryFormat> format) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::_to_copy", "");
  const auto refusal = channels_last_refusal(op, format);
  if (refusal) report_kernel_refusal(op.schema().name().c_str(), *refusal);  // a CPU fallback, or raises
  else count_kernel_call(CountedKernel::ToCopy);
  at::Tensor result;
  {
    const InsideOneDeviceOp one_op;  // its copy_ is part of this op: the op waits once, by its own rule
    result = at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, format);
  }
  after_blocking_to_copy(self, result, non_blocking);
  return result;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout>, std::optional<c10::Device> device, std::optional<bool>) {
  count_kernel_call(CountedKernel::EmptyStrided);
  const c10::DeviceGuard guard(c10::device_or_default(device));
  return at::detail::empty_strided_generic(size, stride, device_allocator(), kDeviceKeys, c10::dtype_or_default(dtype));
}

// An allocation of the device's own, as TorchNeuron counts it (as one op); its composite kernel, run whole by the
// executor, would make a requested host tensor (device="cpu") a device one.
at::Tensor new_empty(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                     std::optional<bool> pin_memory) {
  count_kernel_call(CountedKernel::NewEmpty);
  return at::native::new_empty_symint(self, size, dtype, layout, device, pin_memory);
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(offset));
}

// Host access to device data, and changes of a storage that queued work may still use, wait for the
// device's queue first (and raise what failed in it).
void wait_for_device(const at::Tensor& t) {
  if (t.is_privateuseone() && !runs_inline()) synchronize_device(t.device().index());
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<c10::MemoryFormat> format) {
  count_kernel_call(CountedKernel::Resize);
  wait_for_device(self);
  const c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), format);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

struct QueuedCopy final : QueuedWork {
  at::Tensor dst, src;  // host aliases, taken when the copy is issued
  QueuedCopy(const at::Tensor& d, const at::Tensor& s) : dst(cpu_alias(d)), src(cpu_alias(s)) {
    hold(d.storage());
    hold(s.storage());
  }
  void run() override { dst.copy_(src); }
  std::string describe() const override {
    static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
    return describe_call(op, {dst, src});
  }
};

// What the CPU's copy_ checks before it reads a byte (its TensorIterator: overlap, then broadcast), checked on
// the device tensors at the call: host aliases do not share a storage object, so the host kernel cannot see
// that two device views overlap, and a queued copy would raise only at a later synchronisation.
void check_copy(const at::Tensor& src, const at::Tensor& dst) {
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
  const auto shape = at::infer_size_dimvector(dst.sizes(), src.sizes());
  TORCH_CHECK(c10::IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
}

// A copy within one device is queued; a copy to or from the host reads or writes device data now
// (the host side may change or be read as soon as the call returns).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  check_copy(self, dst);
  count_kernel_call(CountedKernel::CopyFrom);
  const bool from_device = self.is_privateuseone();
  const bool to_device = dst.is_privateuseone();
  count_transfer(from_device, to_device, static_cast<int64_t>(dst.nbytes()));
  if (from_device && to_device && self.device() == dst.device() && !runs_inline()) {
    WorkScope trace(Work::DeviceToDevice);
    trace.describe(-1, dst.device().index(), static_cast<int64_t>(dst.nbytes()));
    auto work = std::make_unique<QueuedCopy>(dst, self);
    work->launch = trace.hand_off();
    run_or_enqueue(dst.device().index(), std::move(work), 2 * static_cast<int64_t>(dst.nbytes()));
    after_blocking_copy(dst, self, non_blocking);
    return dst;
  }
  wait_for_device(self);
  wait_for_device(dst);
  const c10::DeviceGuard guard(to_device ? dst.device() : self.device());
  if (from_device && !to_device) note_host_sync(HostSync::CopyToHost);
  WorkScope work(from_device && to_device ? Work::DeviceToDevice
                 : to_device              ? Work::HostToDevice
                                          : Work::DeviceToHost);
  work.describe(-1, (to_device ? dst : self).device().index(), static_cast<int64_t>(dst.nbytes()));
  cpu_alias(dst).copy_(cpu_alias(self), non_blocking);
  after_blocking_copy(dst, self, non_blocking);
  return dst;
}

// The kernel a CPU fallback writes its result back with (XLA's and TorchNeuron's use): a host tensor into a device one,
// which is resized (through the dispatcher, so trackers list the resize_) only when it is empty.
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(self.is_cpu() && dst.is_privateuseone(), "_copy_from_and_resize: only support copy from cpu tensor to "
              "neuron tensor (got ", self.device(), " to ", dst.device(), "). Use dst.copy_(src) for other copies.");
  TORCH_CHECK(dst.numel() == 0 || dst.sizes() == self.sizes(), "_copy_from_and_resize: a non-empty destination must "
              "have the same size as the source (got ", dst.sizes(), " and ", self.sizes(), "); pass an empty "
              "destination to have it resized.");
  count_kernel_call(CountedKernel::CopyFromAndResize);
  if (dst.sizes() != self.sizes()) {
    const c10::DeviceGuard guard(dst.device());
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  count_kernel_call(CountedKernel::LocalScalarDense);
  wait_for_device(self);
  note_host_sync(HostSync::ScalarRead);
  WorkScope work(Work::DeviceToHost);
  work.describe(-1, self.device().index(), static_cast<int64_t>(self.element_size()));
  count_transfer(true, false, static_cast<int64_t>(self.element_size()));
  return at::native::_local_scalar_dense_cpu(cpu_alias(self));
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  TORCH_CHECK(src.is_privateuseone(), "set_: source tensor is on ", src.device(),
              ", expected neuron (the devices must match, as on every PyTorch device). Move it first with .to('neuron').");
  count_kernel_call(CountedKernel::SetSourceTensor);
  wait_for_device(self);
  return at::native::set_tensor_(self, src);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage src) {
  count_kernel_call(CountedKernel::SetSourceStorage);
  TORCH_CHECK(src.device().is_privateuseone(), "set_: source storage is on ", src.device(),
              ", expected neuron (the devices must match, as on every PyTorch device). Copy the data to the "
              "device with torch.tensor(...).to('neuron') instead of sharing the host storage.");
  wait_for_device(self);
  return at::native::set_(self, src);
}

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage src, int64_t offset, c10::IntArrayRef size,
                                      c10::IntArrayRef stride) {
  count_kernel_call(CountedKernel::SetSourceStorageOffset);
  TORCH_CHECK(src.device().is_privateuseone(), "set_: source storage is on ", src.device(),
              ", expected neuron (the devices must match, as on every PyTorch device). Copy the data to the "
              "device with torch.tensor(...).to('neuron') instead of sharing the host storage.");
  wait_for_device(self);
  return at::cpu::set_(self, src, offset, size, stride);
}

// set_() with no source: an empty storage of the tensor's own device (the CPU kernel would give it a host one).
at::Tensor& set_empty(at::Tensor& self) {
  count_kernel_call(CountedKernel::SetEmpty);
  wait_for_device(self);
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(self.device().type()), true);
  return at::cpu::set_(self, storage, 0, {0}, {});
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  count_kernel_call(CountedKernel::HasCompatibleShallowCopyType);
  const auto dense = [](const at::Tensor& t) { return t.is_cpu() || t.is_privateuseone(); };
  return dense(self) && dense(from) && self.layout() == c10::kStrided && from.layout() == c10::kStrided;
}

// Queued work holds every tensor it uses until it is done, so no block is reused while a stream uses it.
void record_stream(at::Tensor& self, c10::Stream stream) {
  record_stream_use(self.storage().data_ptr(), stream);
}

void refuse_layout(const char* feature, const char* advice, const c10::OperatorHandle& op) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, feature, " are not supported on the neuron device (", op.schema().name(),
                              "). ", advice);
}

void refuse_sparse(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  refuse_layout("Sparse tensors", "Keep sparse tensors on the CPU, or convert them with .to_dense() first.", op);
}

void refuse_nested(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  refuse_layout("Nested tensors",
                "Pad the sequences into a dense tensor (torch.nested.to_padded_tensor on CPU). nn.TransformerEncoder "
                "builds nested tensors on its inference fast path: construct it with enable_nested_tensor=False.",
                op);
}

// TorchNeuron's contiguous takes preserve_format as contiguous_format (PyTorch's composite refuses preserve_format
// on every device); registered for autograd too, so the clone it makes keeps its gradient as the composite's does.
at::Tensor contiguous(const at::Tensor& self, c10::MemoryFormat format) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::contiguous", "");
  const auto refusal = channels_last_refusal(op, format);
  TORCH_CHECK(!refusal, *refusal, ". Keep neuron tensors in torch.contiguous_format, or call clone(memory_format=...), "
              "which keeps the format.");
  return at::native::contiguous(self, format == c10::MemoryFormat::Preserve ? c10::MemoryFormat::Contiguous : format);
}

at::Tensor refuse_forward_ad(const at::Tensor&, const at::Tensor&, int64_t) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Forward-mode AD (torch.autograd.forward_ad dual tensors) is not supported "
                              "on the neuron device. Use reverse-mode autograd (backward) instead, or run the "
                              "forward-mode computation on the CPU.");
}

// x[mask] as TorchNeuron runs it: each boolean mask becomes the index tensors of its True positions (one
// aten::nonzero, on the mask's device), then index runs on them, tracked as aten::index.Tensor; when a mask selects
// nothing the result is empty and no index kernel runs. Calls without a boolean mask, and calls whose masks do not
// fit the tensor (the host kernel raises PyTorch's own error), go to the executor as they are.
void index_tensor(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const size_t n = stack->size();
  const at::Tensor self = (*stack)[n - 2].toTensor();
  const auto indices = (*stack)[n - 1].to<c10::List<std::optional<at::Tensor>>>();
  bool has_mask = false;
  int64_t dims = 0;  // the dimensions of self the indices cover
  bool fits = true;
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined()) {
      dims += 1;
      continue;
    }
    if (index->scalar_type() != c10::kBool) {
      dims += 1;
      continue;
    }
    has_mask = true;
    if (index->dim() == 0) fits = false;
    for (int64_t j = 0; fits && j < index->dim(); ++j) {
      fits = dims + j < self.dim() && index->size(j) == self.size(dims + j);
    }
    dims += index->dim();
  }
  if (!has_mask || !fits || dims > self.dim()) return execute(op, keys, stack);
  c10::List<std::optional<at::Tensor>> expanded;
  bool selects_nothing = false;
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined() || index->scalar_type() != c10::kBool) {
      expanded.push_back(index);
      continue;
    }
    const at::Tensor positions = at::nonzero(*index);  // (selected, mask dims)
    selects_nothing = selects_nothing || positions.size(0) == 0;
    for (int64_t j = 0; j < index->dim(); ++j) expanded.push_back(positions.select(1, j));
  }
  if (!selects_nothing) {
    (*stack)[n - 1] = c10::IValue(expanded);
    return execute(op, keys, stack);
  }
  // The shape index would give (advanced-indexing rules), from meta tensors: nothing runs on the device.
  c10::List<std::optional<at::Tensor>> meta_indices;
  for (const std::optional<at::Tensor>& index : expanded) {
    std::optional<at::Tensor> meta;
    if (index.has_value() && index->defined()) meta = at::empty(index->sizes(), index->options().device(c10::kMeta));
    meta_indices.push_back(meta);
  }
  const at::Tensor meta_self = at::empty_strided(self.sizes(), self.strides(), self.options().device(c10::kMeta));
  const at::Tensor shape = at::index(meta_self, meta_indices);
  torch::jit::drop(*stack, 2);
  torch::jit::push(*stack, at::empty(shape.sizes(), self.options()));
}

// Whether a boolean mask covers the dimensions of self from `first` on (the shape index and index_put require).
bool mask_fits(const at::Tensor& self, const at::Tensor& mask, int64_t first) {
  if (mask.dim() == 0 || first + mask.dim() > self.dim()) return false;
  for (int64_t j = 0; j < mask.dim(); ++j) {
    if (mask.size(j) != self.size(first + j)) return false;
  }
  return true;
}

// x[mask] = v / index_put_ with boolean masks as TorchNeuron runs them. A single mask (after leading Nones) with a
// one-element value and no accumulate is a masked fill: it runs as one queued aten::_index_put_impl_ (whose host
// kernel fills through masked_fill), waiting for nothing. Any other call with a mask converts each mask at the call
// into the index tensors of its True positions (one aten::nonzero, on the mask's device, which waits for the mask's
// values), so what depends on them is decided at the op in both modes, as on the CPU: indexing tensors that do not
// broadcast together raise PyTorch's IndexError there, not later from the queue. Calls without a mask, and masks that
// do not fit the tensor (the host kernel raises PyTorch's own error), go to the executor as they are; autograd saw
// the original indices (it sits above this kernel), so gradients are the CPU's.
void index_put_impl(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const size_t n = stack->size();  // self, indices, values, accumulate, unsafe
  const at::Tensor self = (*stack)[n - 5].toTensor();
  const auto indices = (*stack)[n - 4].to<c10::List<std::optional<at::Tensor>>>();
  const at::Tensor values = (*stack)[n - 3].toTensor();
  const bool accumulate = (*stack)[n - 2].toBool();
  int64_t dims = 0, masks = 0, others = 0, leading_nones = 0;
  bool fits = true;
  for (const std::optional<at::Tensor>& index : indices) {
    const bool given = index.has_value() && index->defined();
    if (given && index->scalar_type() == c10::kBool) {
      fits = fits && mask_fits(self, *index, dims);
      masks += 1;
      dims += index->dim();
      continue;
    }
    if (given) others += 1;
    else if (masks == 0 && others == 0) leading_nones += 1;
    dims += 1;
  }
  if (masks == 0 || !fits || dims > self.dim()) return execute(op, keys, stack);
  const bool masked_fill = masks == 1 && others == 0 && static_cast<int64_t>(indices.size()) == leading_nones + 1 &&
                           values.numel() == 1 && !accumulate;
  if (masked_fill) return execute(op, keys, stack);
  c10::List<std::optional<at::Tensor>> expanded;
  std::vector<at::Tensor> given;
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined() || index->scalar_type() != c10::kBool) {
      expanded.push_back(index);
      if (index.has_value() && index->defined()) given.push_back(*index);
      continue;
    }
    const at::Tensor positions = at::nonzero(*index);  // (selected, mask dims)
    for (int64_t j = 0; j < index->dim(); ++j) {
      expanded.push_back(positions.select(1, j));
      given.push_back(positions.select(1, j));
    }
  }
  try {
    std::vector<int64_t> shape;
    for (const at::Tensor& index : given) shape = at::infer_size(shape, index.sizes());
  } catch (const c10::Error&) {
    std::ostringstream shapes;
    for (size_t i = 0; i < given.size(); ++i) shapes << (i ? ", " : "") << given[i].sizes();
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      shapes.str());
  }
  (*stack)[n - 4] = c10::IValue(expanded);
  execute(op, keys, stack);
}

}  // namespace

TransferCounters transfer_counters() { return {g_h2d.load(), g_d2h.load(), g_d2d.load(), g_copies.load()}; }
void reset_transfer_counters() { g_h2d = g_d2h = g_d2d = g_copies = 0; }
void count_transfer(bool from_device, bool to_device, int64_t bytes) {
  g_copies.fetch_add(1, std::memory_order_relaxed);
  if (from_device && to_device) g_d2d.fetch_add(bytes, std::memory_order_relaxed);
  else if (to_device) g_h2d.fetch_add(bytes, std::memory_order_relaxed);
  else if (from_device) g_d2h.fetch_add(bytes, std::memory_order_relaxed);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  counted_impl(m, CountedKernel::EmptyMemoryFormat, "empty.memory_format", empty_memory_format);
  counted_impl(m, CountedKernel::EmptyStrided, "empty_strided", empty_strided);
  counted_impl(m, CountedKernel::NewEmpty, "new_empty", new_empty);
  counted_impl(m, CountedKernel::ToCopy, "_to_copy", to_copy);
  m.impl("as_strided", as_strided);
  counted_impl(m, CountedKernel::Resize, "resize_", resize_);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("view", view);
  counted_impl(m, CountedKernel::CopyFrom, "_copy_from", copy_from);
  counted_impl(m, CountedKernel::CopyFromAndResize, "_copy_from_and_resize", copy_from_and_resize);
  counted_impl(m, CountedKernel::LocalScalarDense, "_local_scalar_dense", local_scalar_dense);
  counted_impl(m, CountedKernel::SetSourceTensor, "set_.source_Tensor", set_source_tensor);
  counted_impl(m, CountedKernel::SetSourceStorage, "set_.source_Storage", set_source_storage);
  counted_impl(m, CountedKernel::SetSourceStorageOffset, "set_.source_Storage_storage_offset", set_source_storage_offset);
  counted_impl(m, CountedKernel::SetEmpty, "set_", set_empty);
  counted_impl(m, CountedKernel::HasCompatibleShallowCopyType, "_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("record_stream", record_stream);
  m.impl("contiguous", contiguous);
  m.impl("index.Tensor", torch::CppFunction::makeFromBoxedFunction<&index_tensor>());
  m.impl("_index_put_impl_", torch::CppFunction::makeFromBoxedFunction<&index_put_impl>());
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_sparse>()); }
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_sparse>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_nested>());
}
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_make_dual", refuse_forward_ad);
  m.impl("contiguous", contiguous);
}

}  // namespace localneuron
