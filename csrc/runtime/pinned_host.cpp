#include "runtime/pinned_host.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace localneuron {
namespace {

struct HostBlock {
  void* base;
  size_t size;  // rounded up to a power of two, as CUDA's host allocator does, so blocks are reusable
  bool locked;  // mlock succeeded; when RLIMIT_MEMLOCK refuses, the block is still handed out as pinned
};

struct PinnedPool {
  std::mutex mu;
  std::map<uintptr_t, HostBlock*> blocks;  // by base address, for is_pinned_host_ptr on interior pointers
  std::unordered_map<size_t, std::vector<HostBlock*>> cached;
  HostMemoryCounters c{};
};
PinnedPool g_pool;

void add(HostStat& s, int64_t n) {
  s.current += n;
  s.allocated += n;
  s.peak = std::max(s.peak, s.current);
}

void sub(HostStat& s, int64_t n) {
  s.current -= n;
  s.freed += n;
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

HostBlock* create_block(size_t size) {
  void* base = nullptr;
  TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&base, page_size(), size) == 0,
                   "Neuron pinned host memory: could not allocate ", size, " bytes of host memory.");
  // Page-locking may be refused (RLIMIT_MEMLOCK, containers); the memory stays usable and the
  // lock_refusals counter says so.
  const bool locked = mlock(base, size) == 0;
  return new HostBlock{base, size, locked};
}

void destroy_block(HostBlock* b) {
  if (b->locked) munlock(b->base, b->size);
  std::free(b->base);
  delete b;
}

void release_block(void* ctx) {
  auto* b = static_cast<HostBlock*>(ctx);
  std::lock_guard<std::mutex> lock(g_pool.mu);
  sub(g_pool.c.active_requests, 1);
  sub(g_pool.c.active_bytes, static_cast<int64_t>(b->size));
  g_pool.cached[b->size].push_back(b);
}

struct PinnedHostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &release_block, c10::Device(c10::DeviceType::CPU)};
    const size_t size = std::max(page_size(), static_cast<size_t>(c10::llvm::PowerOf2Ceil(n)));
    HostBlock* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_pool.mu);
      auto it = g_pool.cached.find(size);
      if (it != g_pool.cached.end() && !it->second.empty()) {
        block = it->second.back();
        it->second.pop_back();
      }
    }
    if (block == nullptr) {
      block = create_block(size);
      std::lock_guard<std::mutex> lock(g_pool.mu);
      g_pool.blocks.emplace(reinterpret_cast<uintptr_t>(block->base), block);
      add(g_pool.c.allocations, 1);
      add(g_pool.c.allocated_bytes, static_cast<int64_t>(size));
      g_pool.c.num_host_alloc++;
      if (block->locked) g_pool.c.locked_bytes += static_cast<int64_t>(size);
      else g_pool.c.lock_refusals++;
    }
    {
      std::lock_guard<std::mutex> lock(g_pool.mu);
      add(g_pool.c.active_requests, 1);
      add(g_pool.c.active_bytes, static_cast<int64_t>(size));
    }
    return {block->base, block, &release_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
};

PinnedHostAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* pinned_host_allocator() { return &g_pinned_allocator; }

bool is_pinned_host_ptr(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_pool.mu);
  auto it = g_pool.blocks.upper_bound(address);
  if (it == g_pool.blocks.begin()) return false;
  --it;
  return address < it->first + it->second->size;
}

HostMemoryCounters host_memory_counters() {
  std::lock_guard<std::mutex> lock(g_pool.mu);
  return g_pool.c;
}

void reset_host_peak() {
  std::lock_guard<std::mutex> lock(g_pool.mu);
  for (HostStat* s : {&g_pool.c.allocations, &g_pool.c.allocated_bytes, &g_pool.c.active_requests,
                      &g_pool.c.active_bytes}) {
    s->peak = s->current;
  }
}

void reset_host_accumulated() {
  std::lock_guard<std::mutex> lock(g_pool.mu);
  for (HostStat* s : {&g_pool.c.allocations, &g_pool.c.allocated_bytes, &g_pool.c.active_requests,
                      &g_pool.c.active_bytes}) {
    s->allocated = s->freed = 0;
  }
  g_pool.c.num_host_alloc = g_pool.c.num_host_free = g_pool.c.lock_refusals = 0;
}

void empty_host_cache() {
  std::vector<HostBlock*> unused;
  {
    std::lock_guard<std::mutex> lock(g_pool.mu);
    for (auto& [size, blocks] : g_pool.cached) {
      for (HostBlock* b : blocks) {
        g_pool.blocks.erase(reinterpret_cast<uintptr_t>(b->base));
        sub(g_pool.c.allocations, 1);
        sub(g_pool.c.allocated_bytes, static_cast<int64_t>(b->size));
        g_pool.c.num_host_free++;
        if (b->locked) g_pool.c.locked_bytes -= static_cast<int64_t>(b->size);
        unused.push_back(b);
      }
    }
    g_pool.cached.clear();
  }
  for (HostBlock* b : unused) destroy_block(b);
}

}  // namespace localneuron
