#include "executor/executable_cache.h"

#include "executor/executor.h"

#include <algorithm>
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

}  // namespace

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
  return out;
}

void reset_executable_calls() {
  std::shared_lock<std::shared_mutex> lock(g_cache_mutex);
  for (auto& [key, exe] : g_cache) exe->calls = 0;
  g_hits = 0;
  g_misses = 0;
}

void clear_executables() {
  std::unique_lock<std::shared_mutex> lock(g_cache_mutex);
  g_cache_generation++;
  g_cache.clear();
}

}  // namespace localneuron
