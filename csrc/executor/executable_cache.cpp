#include "executor/executable_cache.h"

#include "executor/executor.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace localneuron {

int64_t HostTimer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
namespace {

std::shared_mutex g_cache_mutex;
std::unordered_map<uint64_t, std::unique_ptr<Executable>> g_cache;
std::atomic<uint64_t> g_cache_generation{1};  // bumped when executables are discarded
std::atomic<int64_t> g_hits{0}, g_misses{0};

// Per-thread direct-mapped copy of the cache so that a hit takes no lock.
struct ThreadCache {
  static constexpr size_t kSlots = 1024;
  uint64_t generation = 0;
  uint64_t keys[kSlots] = {};
  Executable* values[kSlots] = {};

  Executable* find(uint64_t key) {
    if (generation != g_cache_generation.load(std::memory_order_relaxed)) return nullptr;
    const size_t slot = key & (kSlots - 1);
    return keys[slot] == key ? values[slot] : nullptr;
  }
  void put(uint64_t key, Executable* exe) {
    const uint64_t current = g_cache_generation.load(std::memory_order_relaxed);
    if (generation != current) {
      std::fill(std::begin(keys), std::end(keys), 0);
      generation = current;
    }
    const size_t slot = key & (kSlots - 1);
    keys[slot] = key;
    values[slot] = exe;
  }
};
thread_local ThreadCache t_cache;

constexpr size_t kCountedKernels = static_cast<size_t>(CountedKernel::Count);
// in CountedKernel's order, set by the kernels' registration: a function's static, since the registration runs while
// the library's globals are still being initialised (in no set order across files)
std::string* kernel_names() {
  static std::string names[kCountedKernels];
  return names;
}
std::atomic<int64_t> g_kernel_calls[kCountedKernels] = {};
std::vector<int64_t> g_kernel_executables;  // set once at registration, before any kernel is counted

}  // namespace

std::vector<std::string> counted_kernel_names() {
  std::string* names = kernel_names();
  for (size_t i = 0; i < kCountedKernels; ++i) TORCH_CHECK(!names[i].empty(), "counted kernel ", i, " was never registered");
  return std::vector<std::string>(names, names + kCountedKernels);
}

void name_counted_kernel(CountedKernel kernel, const char* registered) {
  kernel_names()[static_cast<size_t>(kernel)] = std::string("aten::") + registered;
}

void set_counted_kernel_executables(const std::vector<int64_t>& ids) {
  TORCH_CHECK(ids.size() == kCountedKernels, "set_counted_kernel_executables: expected ", kCountedKernels,
              " executable ids (one per name of counted_kernel_names()), got ", ids.size());
  g_kernel_executables = ids;
}

void count_kernel_call(CountedKernel kernel) {
  g_kernel_calls[static_cast<size_t>(kernel)].fetch_add(1, std::memory_order_relaxed);
}

Executable* find_executable(uint64_t key) {
  if (Executable* exe = t_cache.find(key)) return exe;
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  auto it = g_cache.find(key);
  if (it == g_cache.end()) return nullptr;
  t_cache.put(key, it->second.get());
  return it->second.get();
}

Executable* add_executable(uint64_t key, const RouteDecision& decided) {
  auto exe = std::make_unique<Executable>();
  exe->route = decided.route;
  exe->execution = decided.execution;
  exe->id = decided.executable_id;
  exe->estimated_ns = decided.estimated_ns;
  std::unique_lock<std::shared_mutex> lock(g_cache_mutex);
  auto [it, inserted] = g_cache.emplace(key, std::move(exe));
  t_cache.put(key, it->second.get());
  return it->second.get();
}

void count_hit() { g_hits.fetch_add(1, std::memory_order_relaxed); }
void count_miss() { g_misses.fetch_add(1, std::memory_order_relaxed); }

ExecutorCounters executor_counters() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  return {g_hits.load(), g_misses.load(), static_cast<int64_t>(g_cache.size())};
}

std::vector<std::tuple<int64_t, int64_t>> executable_calls() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  std::vector<std::tuple<int64_t, int64_t>> out;
  for (auto& [key, exe] : g_cache) {
    const int64_t n = exe->calls.load();
    if (n > 0) out.emplace_back(exe->id, n);
  }
  for (size_t k = 0; k < g_kernel_executables.size(); k++) {
    const int64_t n = g_kernel_calls[k].load();
    if (n > 0) out.emplace_back(g_kernel_executables[k], n);
  }
  return out;
}

void reset_executable_calls() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  for (auto& [key, exe] : g_cache) exe->calls = 0;
  for (auto& calls : g_kernel_calls) calls = 0;
  g_hits = 0;
  g_misses = 0;
}

void clear_executables() {
  std::unique_lock<std::shared_mutex> lock(g_cache_mutex);
  g_cache_generation++;
  g_cache.clear();
}

}  // namespace localneuron
