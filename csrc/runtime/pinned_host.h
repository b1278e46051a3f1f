// Pinned host memory: the page-locked staging buffers that pin_memory(), DataLoader(pin_memory=True)
// and DDP's unused-parameter map ask the accelerator for.
#pragma once
#include <c10/core/Allocator.h>
#include <cstdint>

namespace localneuron {

c10::Allocator* pinned_host_allocator();
// True for any address inside a live or cached pinned block.
bool is_pinned_host_ptr(const void* ptr);

// CUDA's host-allocator statistics (torch.cuda.host_memory_stats), plus how much is really locked.
struct HostStat {
  int64_t current, peak, allocated, freed;
};
struct HostMemoryCounters {
  HostStat allocations, allocated_bytes, active_requests, active_bytes;
  int64_t num_host_alloc, num_host_free, locked_bytes, lock_refusals;
};
HostMemoryCounters host_memory_counters();
void reset_host_peak();
void reset_host_accumulated();
// Unlocks and frees the cached (unused) pinned blocks.
void empty_host_cache();

}  // namespace localneuron
