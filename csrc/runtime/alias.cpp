#include "runtime/alias.h"

#include "runtime/allocator.h"
#include "runtime/device_state.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace localneuron {
namespace {

constexpr c10::DispatchKeySet kHostKeys(c10::DispatchKey::CPU);
constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

struct AdoptedBytes {
  c10::DataPtr host;     // taken over when nothing else refers to the host storage
  c10::Storage shared;   // otherwise the host storage is kept alive
  int64_t bytes;
  c10::DeviceIndex device;
  void* address;
  StreamUses uses;
};

// Freed in Python (and counted as freed) while queued work still reads or writes them.
std::mutex g_waiting_mu;
std::vector<AdoptedBytes*> g_waiting;
std::atomic<bool> g_any_waiting{false};

void release_adopted_bytes(void* ctx) {
  auto* a = static_cast<AdoptedBytes*>(ctx);
  release_adopted(a->device, a->bytes, a->address);
  if (a->uses.passed()) {
    delete a;
    return;
  }
  std::lock_guard<std::mutex> lock(g_waiting_mu);
  g_waiting.push_back(a);
  g_any_waiting.store(true, std::memory_order_release);
}

// conj() and neg views are lazy: a bit on the tensor, not a change of the bytes.
void copy_lazy_bits(c10::TensorImpl& impl, const at::Tensor& host) {
  if (host.is_conj()) impl._set_conj(true);
  if (host.is_neg()) impl._set_neg(true);
}

// A host kernel must never run past a storage: one shrunk by untyped_storage().resize_() (as FSDP2
// frees parameters) no longer holds the tensor that still points at it.
void check_storage_covers(const at::Tensor& t, size_t nbytes) {
  const int64_t numel = t.numel();
  if (numel == 0) return;
  const size_t item = t.itemsize();
  if (t.is_contiguous() && static_cast<size_t>(t.storage_offset() + numel) * item <= nbytes) return;
  const size_t needed = at::detail::computeStorageNbytes(t.sizes(), t.strides(), item, t.storage_offset());
  TORCH_CHECK(needed <= nbytes, "A neuron tensor of shape ", t.sizes(), " needs ", needed,
              " bytes but its storage holds ", nbytes,
              " (the storage was resized with untyped_storage().resize_()). Resize the storage back to at least ",
              needed, " bytes before using the tensor, or make a new tensor.");
}

}  // namespace

StreamUses* adopted_stream_uses(const c10::DataPtr& ptr) {
  if (ptr.get_deleter() != &release_adopted_bytes) return nullptr;
  return &static_cast<AdoptedBytes*>(ptr.get_context())->uses;
}

void release_passed_adopted_bytes() {
  if (!g_any_waiting.load(std::memory_order_acquire)) return;
  std::vector<AdoptedBytes*> passed;
  {
    std::lock_guard<std::mutex> lock(g_waiting_mu);
    auto waiting = std::partition(g_waiting.begin(), g_waiting.end(), [](AdoptedBytes* a) { return !a->uses.passed(); });
    passed.assign(waiting, g_waiting.end());
    g_waiting.erase(waiting, g_waiting.end());
    g_any_waiting.store(!g_waiting.empty(), std::memory_order_release);
  }
  for (AdoptedBytes* a : passed) delete a;  // outside the lock: a shared host storage may free more
}

namespace {

// Non-owning: whoever asks keeps the bytes alive for as long as the host kernel runs.
c10::intrusive_ptr<c10::TensorImpl> host_tensor_over(void* block, size_t nbytes, caffe2::TypeMeta dtype,
                                                     c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset) {
  c10::Storage host(c10::Storage::use_byte_size_t{}, nbytes, c10::DataPtr(block, c10::Device(c10::DeviceType::CPU)),
                    alias_allocator(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(host), kHostKeys, dtype);
  impl->set_sizes_and_strides(sizes, strides, offset);
  return impl;
}

}  // namespace

TensorSnapshot::TensorSnapshot(const at::Tensor& t)
    : offset(t.storage_offset()), dtype(t.scalar_type()), sizes(t.sizes().begin(), t.sizes().end()),
      strides(t.strides().begin(), t.strides().end()) {
  const c10::StorageImpl* st = t.storage().unsafeGetStorageImpl();
  check_storage_covers(t, st->nbytes());
  block = const_cast<void*>(st->data());
  block_bytes = st->nbytes();
}

bool snapshot_is_exact(const at::Tensor& t) { return !t._is_zerotensor() && !t.is_conj() && !t.is_neg(); }

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  // An efficient zero tensor has no bytes at all: host kernels get real zeros, as ZeroTensor's fallback gives.
  if (C10_UNLIKELY(t._is_zerotensor())) return at::zeros(t.sizes(), t.options().device(c10::kCPU));
  const c10::StorageImpl* st = t.storage().unsafeGetStorageImpl();
  check_storage_covers(t, st->nbytes());
  auto impl = host_tensor_over(const_cast<void*>(st->data()), st->nbytes(), t.dtype(), t.sizes(), t.strides(),
                               t.storage_offset());
  copy_lazy_bits(*impl, t);
  return at::Tensor(std::move(impl));
}

at::Tensor cpu_alias(const TensorSnapshot& s) {
  return at::Tensor(host_tensor_over(s.block, s.block_bytes, caffe2::TypeMeta::fromScalarType(s.dtype), s.sizes,
                                     s.strides, s.offset));
}

at::Tensor adopt(const at::Tensor& host, c10::DeviceIndex device) {
  if (!host.defined() || !host.is_cpu()) return host;
  release_passed_adopted_bytes();
  c10::StorageImpl* hs = host.storage().unsafeGetStorageImpl();
  const size_t nbytes = hs->nbytes();
  c10::DataPtr data;
  if (nbytes == 0) {
    data = c10::DataPtr(nullptr, c10::Device(kNeuron, device));
  } else if (is_device_block(hs->data_ptr()) && host.storage().use_count() == 1) {
    // Device bytes a host kernel obtained by resizing an alias: hand them over as they are.
    data = hs->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
    hs->set_nbytes(0);
    data.unsafe_set_device(c10::Device(kNeuron, device));
  } else {
    void* ptr = hs->mutable_data();
    account_adopted(device, static_cast<int64_t>(nbytes), ptr);
    auto* ctx = new AdoptedBytes{c10::DataPtr(), c10::Storage(), static_cast<int64_t>(nbytes), device, ptr};
    if (host.storage().use_count() == 1) {
      ctx->host = hs->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
      hs->set_nbytes(0);
    } else {
      ctx->shared = host.storage();
    }
    data = c10::DataPtr(ptr, ctx, &release_adopted_bytes, c10::Device(kNeuron, device));
  }
  c10::Storage storage(c10::Storage::use_byte_size_t{}, nbytes, std::move(data), device_allocator(),
                       /*resizable=*/true);
  // An efficient zero tensor (no bytes) stays one, so that ops see it as zeros.
  const c10::DispatchKeySet keys = host._is_zerotensor() ? kDeviceKeys.add(c10::DispatchKey::ZeroTensor) : kDeviceKeys;
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), keys, host.dtype());
  impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
  copy_lazy_bits(*impl, host);
  return at::Tensor(std::move(impl));
}

at::Tensor view_like(const at::Tensor& base, const at::Tensor& host_view) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()),
                                                   base.key_set(), host_view.dtype());
  impl->set_sizes_and_strides(host_view.sizes(), host_view.strides(), host_view.storage_offset());
  copy_lazy_bits(*impl, host_view);
  return at::Tensor(std::move(impl));
}

void sync_back(const at::Tensor& device_tensor, const at::Tensor& alias) {
  c10::StorageImpl* ds = device_tensor.storage().unsafeGetStorageImpl();
  c10::StorageImpl* as = alias.storage().unsafeGetStorageImpl();
  if (as->data() != ds->data() || as->nbytes() != ds->nbytes()) {
    TORCH_INTERNAL_ASSERT(is_device_block(as->data_ptr()) || as->nbytes() == 0,
                          "a host kernel reallocated a device tensor with a foreign allocator");
    c10::DataPtr moved = as->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
    const size_t nbytes = as->nbytes();
    as->set_nbytes(0);
    moved.unsafe_set_device(device_tensor.device());
    if (!moved) moved = c10::DataPtr(nullptr, device_tensor.device());
    ds->set_data_ptr_noswap(std::move(moved));
    ds->set_nbytes(nbytes);
  }
  if (device_tensor.sizes() != alias.sizes() || device_tensor.strides() != alias.strides() ||
      device_tensor.storage_offset() != alias.storage_offset()) {
    device_tensor.unsafeGetTensorImpl()->set_sizes_and_strides(alias.sizes(), alias.strides(),
                                                               alias.storage_offset());
  }
}

}  // namespace localneuron
