// Device memory: host memory handed out per simulated NeuronCore, with the HBM capacity of the
// target enforced and the caching-allocator statistics TorchNeuron reports.
#pragma once
#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/stream_order.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace localneuron {

// Where queued work last used a block of device memory, per stream (runtime/stream_order.h).
// Written when work is queued, read when the block is freed and handed out again.
class StreamUses {
 public:
  void note(const StreamPosition& position);
  // Whether an allocation made now by this thread on the current stream of `device` may take the block.
  bool reusable_now(c10::DeviceIndex device) const;
  // Whether every work stamped here has run (the bytes may go back to the host).
  bool passed() const;
  void clear();

 private:
  static constexpr int kSlots = 2;  // the block header has room for two
  struct Lock;
  StreamPosition at_[kSlots];
  bool overflow_ = false;  // more streams than slots used the block: it waits for every queue of the device
  mutable std::atomic<bool> busy_{false};
};

// Stamps the device blocks of `storages` as used by the work queued at `position`.
void note_stream_use(c10::ArrayRef<WeakStorage> storages, const StreamPosition& position);
// Tensor.record_stream: the bytes behind `ptr` are in use by everything queued on `stream` so far.
void record_stream_use(const c10::DataPtr& ptr, const c10::Stream& stream);

c10::DeviceAllocator* device_allocator();
// The one byte formatter, CUDA's out-of-memory wording: "512 bytes", "1.50 KiB", "24.00 GiB" (never "0.00 MiB" for
// a small request). It lives here because the allocator's out-of-memory message is made without Python; Python's
// localneuron/runtime/units.bytes_text is this function.
std::string format_bytes(double bytes);
// Allocator for the CPU aliases of device tensors: when a host kernel resizes an alias (out=
// arguments), the new bytes are device bytes that sync_back() moves into the device storage.
c10::Allocator* alias_allocator();
bool is_device_block(const c10::DataPtr& ptr);

// A host kernel computing a device op's result could not allocate `bytes` from the host (the result is
// made on the host, then adopted): raises the device's out-of-memory error, saying whether the NeuronCore
// itself would have had room.
[[noreturn]] void raise_host_kernel_out_of_memory(c10::DeviceIndex device, size_t bytes);

// Memory produced by a host kernel and adopted as device memory: counted against capacity.
void account_adopted(c10::DeviceIndex device, int64_t bytes, void* address);
void release_adopted(c10::DeviceIndex device, int64_t bytes, void* address);

struct MemoryCounters {
  int64_t allocated_current, allocated_peak, allocated_total, freed_total;
  int64_t reserved_current, reserved_peak, reserved_total, reserved_freed_total;
  int64_t alloc_requests, tensor_frees, alloc_retries, ooms, capacity;
};
MemoryCounters memory_counters(c10::DeviceIndex device);
void reset_peak(c10::DeviceIndex device);
void reset_accumulated(c10::DeviceIndex device);
void empty_cache(c10::DeviceIndex device);

}  // namespace localneuron
