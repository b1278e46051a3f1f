// Memory history for torch.neuron.memory._record_memory_history / _snapshot, in the format of
// torch.cuda.memory._snapshot() so that PyTorch's memory visualiser (pytorch.org/memory_viz) opens it.
// Every device block is its own segment (the allocator caches whole blocks by size class).
#pragma once
#include <pybind11/pybind11.h>

#include <atomic>
#include <c10/core/Device.h>
#include <cstddef>

namespace localneuron {

extern std::atomic<bool> g_memory_history_on;
inline bool memory_history_on() { return g_memory_history_on.load(std::memory_order_relaxed); }

void record_memory_history(bool enabled, bool with_stacks, size_t max_entries);
// new_segment: the block was reserved for this request rather than taken from the cache.
void note_alloc(c10::DeviceIndex device, const void* address, size_t size, size_t requested, bool new_segment);
void note_free(c10::DeviceIndex device, const void* address, size_t size);
void note_segment_free(c10::DeviceIndex device, const void* address, size_t size);
pybind11::dict memory_snapshot();

}  // namespace localneuron
