// Device memory: host memory handed out per simulated NeuronCore, with the HBM capacity of the
// target enforced and the caching-allocator statistics TorchNeuron reports.
#pragma once
#include <c10/core/CachingDeviceAllocator.h>
#include <cstdint>

namespace localneuron {

c10::DeviceAllocator* device_allocator();
// Allocator for the CPU aliases of device tensors: when a host kernel resizes an alias (out=
// arguments), the new bytes are device bytes that sync_back() moves into the device storage.
c10::Allocator* alias_allocator();
bool is_device_block(const c10::DataPtr& ptr);

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
