#include "runtime/allocator.h"
#include "runtime/alias.h"
#include "runtime/memory_history.h"

#include "runtime/device_state.h"
#include "queue/queue.h"

#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace localneuron {
namespace {

constexpr size_t kHeader = 64;  // keeps the payload 64-byte aligned
constexpr size_t kSmallLimit = 1 << 20;
constexpr size_t kRoundedLimit = 16 << 20;
constexpr size_t kSegment = 2 << 20;
// Larger requests fit no HBM, and rounding them could overflow.
constexpr size_t kMaxRequest = static_cast<size_t>(kMaxCapacity);
constexpr size_t kAgg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

struct BlockHeader {
  size_t rounded;  // the block's size (reserved)
  size_t counted;  // the request it serves now, as allocated bytes count it
  c10::DeviceIndex device;
  StreamUses uses;
};
static_assert(sizeof(BlockHeader) <= kHeader, "the block header must fit before the payload");

size_t round_512(size_t n) { return (n + 511) & ~size_t(511); }

// Size classes of TorchNeuron's caching allocator: small requests in 512-byte steps, mid-size
// requests in 2 MiB segments, large requests unrounded (beyond 512-byte alignment).
// Requires n <= kMaxRequest.
size_t round_size(size_t n) {
  if (n < kSmallLimit || n >= kRoundedLimit) return round_512(n);
  return (n + kSegment - 1) / kSegment * kSegment;
}

// Allocated bytes count the request in 512-byte steps, as a caching allocator that splits its
// segments counts a block; the rest of a mid-size segment is reserved, not allocated.
size_t counted_size(size_t n) { return n > kMaxRequest ? n : round_512(n); }

struct DeviceMemory {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<BlockHeader*>> cached;
  int64_t cached_bytes = 0;
  int64_t adopted_bytes = 0;
  MemoryCounters c{};
};
DeviceMemory g_memory[kMaxDevices];

// Returns the cached blocks to the host, except those queued work may still use (callers drain the
// device's queues first; a worker, which cannot, keeps them).
void release_cache_locked(DeviceMemory& m) {
  for (auto& [size, blocks] : m.cached) {
    std::vector<BlockHeader*> in_use;
    for (BlockHeader* b : blocks) {
      if (!b->uses.passed()) {
        in_use.push_back(b);
        continue;
      }
      if (memory_history_on()) note_segment_free(b->device, reinterpret_cast<char*>(b) + kHeader, size);
      c10::free_cpu(b);
      m.c.reserved_current -= static_cast<int64_t>(size);
      m.c.reserved_freed_total += static_cast<int64_t>(size);
      m.cached_bytes -= static_cast<int64_t>(size);
    }
    blocks = std::move(in_use);
  }
}

enum class Room { Free, AfterFlush, None };

// Whether `bytes` more fit the device's HBM as it is, or once the cached free blocks are released.
Room room_for_locked(const DeviceMemory& m, size_t bytes) {
  if (bytes > kMaxRequest) return Room::None;
  const int64_t free = device_capacity() - m.c.reserved_current;
  if (static_cast<int64_t>(bytes) <= free) return Room::Free;
  if (static_cast<int64_t>(bytes) <= free + m.cached_bytes) return Room::AfterFlush;
  return Room::None;
}

// Counts a failed request and raises; every other counter stays as it was.
[[noreturn]] void raise_out_of_memory_locked(DeviceMemory& m, c10::DeviceIndex device, size_t requested,
                                             size_t rounded, bool host_failed) {
  m.c.ooms++;
  const int64_t capacity = device_capacity();
  std::string request = format_bytes(rounded);
  if (rounded != requested) request += " (" + std::to_string(requested) + " bytes requested, rounded up)";
  const std::string where = "neuron:" + std::to_string(device) + " (simulated " + target_name() +
                            " NeuronCore) has a total capacity of " + format_bytes(capacity) + " of which " +
                            format_bytes(capacity - m.c.reserved_current) + " is free. Of the allocated memory " +
                            format_bytes(m.c.allocated_current) + " is allocated by tensors, and " +
                            format_bytes(m.cached_bytes) + " is reserved but unallocated (cached for reuse).";
  if (host_failed) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "Neuron out of memory. Tried to allocate ", request, ". ", where,
                     " The simulated NeuronCore has room, but the host could not provide the memory that "
                     "simulates it. Free host memory, or lower LOCALNEURON_HBM_BYTES_PER_CORE to rehearse the "
                     "device's limit on this machine.");
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, "Neuron out of memory. Tried to allocate ", request, ". ", where,
                   " Reduce the batch size or model size, shard the model across more NeuronCores, or pick a "
                   "larger target with LOCALNEURON_TARGET.");
}

void commit_reservation_locked(DeviceMemory& m, Room room, int64_t bytes) {
  if (room == Room::AfterFlush) {
    m.c.alloc_retries++;
    release_cache_locked(m);
  }
  m.c.reserved_current += bytes;
  m.c.reserved_total += bytes;
  m.c.reserved_peak = std::max(m.c.reserved_peak, m.c.reserved_current);
}

void count_alloc_locked(DeviceMemory& m, int64_t bytes) {
  m.c.alloc_requests++;
  m.c.allocated_current += bytes;
  m.c.allocated_total += bytes;
  m.c.allocated_peak = std::max(m.c.allocated_peak, m.c.allocated_current);
}

void count_free_locked(DeviceMemory& m, int64_t bytes) {
  m.c.tensor_frees++;
  m.c.allocated_current -= bytes;
  m.c.freed_total += bytes;
}

// torch.profiler(profile_memory=True) records device memory events, as CUDA's allocator reports them;
// a no-op (a thread-local lookup) when no profiler records memory.
void report_to_profiler(void* ptr, int64_t delta, int64_t allocated, int64_t reserved, c10::DeviceIndex device) {
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(ptr, delta, static_cast<size_t>(allocated), static_cast<size_t>(reserved),
                                     c10::Device(kNeuron, device));
  }
}

void free_block(void* ctx) {
  auto* b = static_cast<BlockHeader*>(ctx);
  void* ptr = reinterpret_cast<char*>(b) + kHeader;
  if (memory_history_on()) note_free(b->device, ptr, b->rounded);
  DeviceMemory& m = g_memory[b->device];
  int64_t allocated, reserved;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    count_free_locked(m, static_cast<int64_t>(b->counted));
    m.cached[b->rounded].push_back(b);
    m.cached_bytes += static_cast<int64_t>(b->rounded);
    allocated = m.c.allocated_current;
    reserved = m.c.reserved_current;
  }
  report_to_profiler(ptr, -static_cast<int64_t>(b->counted), allocated, reserved, b->device);
}

// The most recently freed block of the size that this thread may use now (stream_order.h, rule 3), if any:
// `in_stream_order` when the caller's uses of it will be ordered on the current stream, not made right now.
BlockHeader* take_cached_locked(DeviceMemory& m, size_t rounded, c10::DeviceIndex device, bool in_stream_order) {
  auto it = m.cached.find(rounded);
  if (it == m.cached.end()) return nullptr;
  std::vector<BlockHeader*>& blocks = it->second;
  for (size_t i = blocks.size(); i-- > 0;) {
    BlockHeader* block = blocks[i];
    if (!(in_stream_order ? block->uses.reusable_now(device) : block->uses.passed())) continue;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    m.cached_bytes -= static_cast<int64_t>(rounded);
    block->uses.clear();
    return block;
  }
  return nullptr;
}

// The host memory is obtained before any counter moves (and before the cache is flushed to make
// room), so a request that fails for either reason leaves the statistics as they were. Like
// CUDA's caching allocator, the device lock is held while the backing memory is obtained.
c10::DataPtr allocate_block(size_t n, c10::Device device, bool in_stream_order) {
  const c10::DeviceIndex index = device.index();
  if (n == 0) return c10::DataPtr(nullptr, device);
  check_not_forked_child();
  mark_runtime_initialized();
  release_passed_adopted_bytes();
  const size_t rounded = n > kMaxRequest ? n : round_size(n);
  DeviceMemory& m = g_memory[index];
  BlockHeader* block = nullptr;
  bool new_segment = false;
  int64_t allocated, reserved;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    // A freed block is reused at once on its stream; blocks other streams' queued work still uses, and
    // the cache's return to the host, wait for the queues: a request that does not fit as things stand
    // waits for the device's queues once before it flushes the cache or fails.
    for (bool drained = runs_inline();; drained = true) {
      block = take_cached_locked(m, rounded, index, in_stream_order);
      if (block != nullptr) break;
      const Room room = room_for_locked(m, rounded);
      if (room != Room::Free && !drained) {
        lock.unlock();
        drain_device(index);
        lock.lock();
        continue;
      }
      if (room == Room::None) raise_out_of_memory_locked(m, index, n, rounded, /*host_failed=*/false);
      new_segment = true;
      try {
        block = new (c10::alloc_cpu(rounded + kHeader)) BlockHeader{rounded, 0, index, {}};
      } catch (const c10::Error&) {
        raise_out_of_memory_locked(m, index, n, rounded, /*host_failed=*/true);
      }
      commit_reservation_locked(m, room, static_cast<int64_t>(rounded));
      break;
    }
    block->counted = counted_size(n);
    count_alloc_locked(m, static_cast<int64_t>(block->counted));
    allocated = m.c.allocated_current;
    reserved = m.c.reserved_current;
  }
  // Outside the device lock: recording takes the GIL for the Python stack.
  if (memory_history_on()) note_alloc(index, reinterpret_cast<char*>(block) + kHeader, rounded, n, new_segment);
  report_to_profiler(reinterpret_cast<char*>(block) + kHeader, static_cast<int64_t>(block->counted), allocated, reserved,
                     index);
  return {reinterpret_cast<char*>(block) + kHeader, block, &free_block, device};
}

struct NeuronAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t n) override {
    return allocate_block(n, c10::Device(kNeuron, current_device()), /*in_stream_order=*/true);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    for (int d = 0; d < device_count(); d++) localneuron::empty_cache(static_cast<c10::DeviceIndex>(d));
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { record_stream_use(ptr, stream); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    drain_device(device);
    const MemoryCounters c = memory_counters(device);
    c10::CachingDeviceAllocator::DeviceStats s;
    s.allocated_bytes[kAgg] = {c.allocated_current, c.allocated_peak, c.allocated_total, c.freed_total};
    s.active_bytes[kAgg] = s.allocated_bytes[kAgg];
    s.requested_bytes[kAgg] = s.allocated_bytes[kAgg];
    s.reserved_bytes[kAgg] = {c.reserved_current, c.reserved_peak, c.reserved_total, c.reserved_freed_total};
    s.allocation[kAgg].allocated = c.alloc_requests;
    s.allocation[kAgg].freed = c.tensor_frees;
    s.allocation[kAgg].current = c.alloc_requests - c.tensor_frees;
    s.num_alloc_retries = c.alloc_retries;
    s.num_ooms = c.ooms;
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { reset_accumulated(device); }
  void resetPeakStats(c10::DeviceIndex device) override { reset_peak(device); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    drain_device(device);
    const MemoryCounters c = memory_counters(device);
    return {static_cast<size_t>(c.capacity - c.reserved_current), static_cast<size_t>(c.capacity)};
  }
};

// A host kernel resizing an output alias writes the new bytes right away, outside its stream's order (on a worker,
// or on an issuing thread running the op now): it may take only blocks whose stamped work has passed.
struct AliasAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr ptr = allocate_block(n, c10::Device(kNeuron, current_device()), /*in_stream_order=*/false);
    ptr.unsafe_set_device(c10::Device(c10::DeviceType::CPU));
    return ptr;
  }
  void copy_data(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
};

NeuronAllocator g_allocator;
AliasAllocator g_alias_allocator;

// The stamps of the device bytes behind `ptr`, or nullptr for bytes that are not the device's.
StreamUses* stream_uses_of(const c10::DataPtr& ptr) {
  if (ptr.get_deleter() == &free_block) return &static_cast<BlockHeader*>(ptr.get_context())->uses;
  return adopted_stream_uses(ptr);
}

}  // namespace

std::string format_bytes(double bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char buf[64];
  if (std::fabs(bytes) < 1024) {
    std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
    return buf;
  }
  int unit = -1;
  while (std::fabs(bytes) >= 1024 && unit < 5) {
    bytes /= 1024;
    unit++;
  }
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[unit]);
  return buf;
}

struct StreamUses::Lock {
  std::atomic<bool>& busy;
  explicit Lock(std::atomic<bool>& b) : busy(b) {
    while (busy.exchange(true, std::memory_order_acquire)) {
    }
  }
  ~Lock() { busy.store(false, std::memory_order_release); }
};

void StreamUses::note(const StreamPosition& position) {
  if (position.queue == nullptr) return;
  const Lock lock(busy_);
  int free_slot = -1;
  for (int i = 0; i < kSlots; i++) {
    if (at_[i].queue == position.queue) {
      at_[i].seq = std::max(at_[i].seq, position.seq);
      return;
    }
    if (free_slot < 0 && (at_[i].queue == nullptr || position_passed(at_[i]))) free_slot = i;
  }
  if (free_slot >= 0) {
    at_[free_slot] = position;
  } else {
    overflow_ = true;
  }
}

bool StreamUses::reusable_now(c10::DeviceIndex device) const {
  const Lock lock(busy_);
  for (const StreamPosition& p : at_) {
    if (p.queue != nullptr && !localneuron::reusable_now(p, device)) return false;
  }
  return !overflow_ || queues_idle();
}

bool StreamUses::passed() const {
  const Lock lock(busy_);
  for (const StreamPosition& p : at_) {
    if (p.queue != nullptr && !position_passed(p)) return false;
  }
  return !overflow_ || queues_idle();
}

void StreamUses::clear() {
  const Lock lock(busy_);
  for (StreamPosition& p : at_) p = StreamPosition{};
  overflow_ = false;
}

void note_stream_use(c10::ArrayRef<WeakStorage> storages, const StreamPosition& position) {
  for (const WeakStorage& weak : storages) {
    // Alive: the thread queuing the work holds the tensors it passed.
    if (StreamUses* uses = stream_uses_of(weak._unsafe_get_target()->data_ptr())) uses->note(position);
  }
}

void record_stream_use(const c10::DataPtr& ptr, const c10::Stream& stream) {
  if (StreamUses* uses = stream_uses_of(ptr)) uses->note(stream_tail(stream));
}

REGISTER_ALLOCATOR(kNeuron, &g_allocator);

c10::DeviceAllocator* device_allocator() { return &g_allocator; }
c10::Allocator* alias_allocator() { return &g_alias_allocator; }
bool is_device_block(const c10::DataPtr& ptr) { return ptr.get_deleter() == &free_block; }

// Adopted bytes are counted as blocks count their requests, so that the allocated bytes of a program
// do not depend on whether its results came from the cache (queued ops) or from host kernels (ops run
// when issued).
int64_t adopted_size(int64_t bytes) { return static_cast<int64_t>(counted_size(static_cast<size_t>(bytes))); }

void raise_host_kernel_out_of_memory(c10::DeviceIndex device, size_t bytes) {
  DeviceMemory& m = g_memory[device];
  const size_t counted = static_cast<size_t>(adopted_size(static_cast<int64_t>(std::min<size_t>(bytes, kMaxRequest))));
  std::lock_guard<std::mutex> lock(m.mu);
  raise_out_of_memory_locked(m, device, bytes, counted, room_for_locked(m, bytes) != Room::None);
}

void account_adopted(c10::DeviceIndex device, int64_t bytes, void* address) {
  // a host kernel's result becomes device memory: it initialises the runtime and is refused in a forked child, as an
  // allocation is (a process whose first device tensors were adopted is initialised all the same)
  check_not_forked_child();
  mark_runtime_initialized();
  DeviceMemory& m = g_memory[device];
  const int64_t counted = adopted_size(bytes);
  int64_t allocated, reserved;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    const Room room = room_for_locked(m, static_cast<size_t>(counted));
    if (room == Room::None) {
      raise_out_of_memory_locked(m, device, static_cast<size_t>(bytes), static_cast<size_t>(counted), false);
    }
    commit_reservation_locked(m, room, counted);
    count_alloc_locked(m, counted);
    allocated = m.c.allocated_current;
    reserved = m.c.reserved_current;
  }
  report_to_profiler(address, counted, allocated, reserved, device);
}

void release_adopted(c10::DeviceIndex device, int64_t bytes, void* address) {
  DeviceMemory& m = g_memory[device];
  const int64_t counted = adopted_size(bytes);
  int64_t allocated, reserved;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    count_free_locked(m, counted);
    m.c.reserved_current -= counted;
    m.c.reserved_freed_total += counted;
    allocated = m.c.allocated_current;
    reserved = m.c.reserved_current;
  }
  report_to_profiler(address, -counted, allocated, reserved, device);
}

MemoryCounters memory_counters(c10::DeviceIndex device) {
  DeviceMemory& m = g_memory[checked_index(device)];
  std::lock_guard<std::mutex> lock(m.mu);
  MemoryCounters c = m.c;
  c.capacity = device_capacity();
  return c;
}

void reset_peak(c10::DeviceIndex device) {
  DeviceMemory& m = g_memory[checked_index(device)];
  std::lock_guard<std::mutex> lock(m.mu);
  m.c.allocated_peak = m.c.allocated_current;
  m.c.reserved_peak = m.c.reserved_current;
}

void reset_accumulated(c10::DeviceIndex device) {
  DeviceMemory& m = g_memory[checked_index(device)];
  std::lock_guard<std::mutex> lock(m.mu);
  m.c.allocated_total = m.c.freed_total = m.c.reserved_total = m.c.reserved_freed_total = 0;
  m.c.alloc_requests = m.c.tensor_frees = m.c.alloc_retries = m.c.ooms = 0;
}

void empty_cache(c10::DeviceIndex device) {
  DeviceMemory& m = g_memory[checked_index(device)];
  drain_device(device);  // queued work may still use cached blocks
  release_passed_adopted_bytes();
  std::lock_guard<std::mutex> lock(m.mu);
  release_cache_locked(m);
}

}  // namespace localneuron
