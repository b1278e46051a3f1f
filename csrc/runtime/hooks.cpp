// PrivateUse1 hooks: what PyTorch asks of any accelerator (device count, generators, pinned host
// memory, storage resize).
#include "runtime/allocator.h"
#include "runtime/device_state.h"
#include "runtime/generator.h"
#include "runtime/pinned_host.h"
#include "queue/queue.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>

namespace localneuron {
namespace {

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return runtime_initialized(); }
  void init() const override { mark_runtime_initialized(); }
  c10::DeviceIndex deviceCount() const override { return device_count_for_pytorch(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    const c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return new_generator(d); }
  at::Device getDeviceFromPtr(void*) const override { return {kNeuron, current_device()}; }
  bool isPinnedPtr(const void* ptr) const override { return is_pinned_host_ptr(ptr); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }

  // storage.resize_() lands here; FSDP2 frees and re-materialises parameters this way.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_size) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    if (!runs_inline()) synchronize_device(impl->device().index());  // queued work may use these bytes
    const c10::DeviceGuard guard(impl->device());
    // An empty DataPtr must still name the device, or the storage would report device cpu.
    c10::DataPtr fresh = new_size ? device_allocator()->allocate(new_size) : c10::DataPtr(nullptr, impl->device());
    const size_t keep = std::min(new_size, impl->nbytes());
    if (keep && impl->data()) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_size);
  }
};

const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace localneuron
