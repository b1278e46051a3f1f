// Executables by signature: the process-wide cache and a lock-free per-thread copy for hits.
#pragma once
#include "executor/executor_contract.h"

#include <atomic>
#include <cstdint>

namespace localneuron {

struct Executable {
  Route route;
  Execution execution;
  int64_t id;         // the Python policy's handle for it (ops/tracking.py)
  int64_t estimated_ns;  // per call on the simulated target, for the report's time by source line
  std::atomic<int64_t> calls{0};
  // The host kernel's time per call, a running mean of sampled calls (HostTimer), or -1 before the
  // first: the queue runs short work on the issuing thread and hands long work to its worker (queue.h).
  std::atomic<int64_t> host_ns{-1};
  std::atomic<uint32_t> timed_calls{0};
  // A tensor its calls write (in place or out=) is not contiguous, a fact of its signature: TorchNeuron's kernel
  // launch refuses such a write, so every call asks the policy first (report_strided_write).
  bool writes_strided = false;
};

// Times the host kernel of an executable's call when the call is sampled (the first few of each
// executable, then one in 32); a null executable times nothing. Counters are updated without atomic
// read-modify-write: a lost update between threads only moves a sample.
class HostTimer {
 public:
  explicit HostTimer(Executable* exe) : exe_(sampled(exe) ? exe : nullptr), start_(exe_ != nullptr ? now_ns() : 0) {}
  ~HostTimer() {
    if (exe_ == nullptr) return;
    const int64_t ns = now_ns() - start_, mean = exe_->host_ns.load(std::memory_order_relaxed);
    exe_->host_ns.store(mean < 0 ? ns : (3 * mean + ns) / 4, std::memory_order_relaxed);
  }
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;

 private:
  static bool sampled(Executable* exe) {
    if (exe == nullptr) return false;
    const uint32_t n = exe->timed_calls.load(std::memory_order_relaxed);
    exe->timed_calls.store(n + 1, std::memory_order_relaxed);
    return n < 4 || n % 32 == 0;
  }
  static int64_t now_ns();
  Executable* exe_;
  int64_t start_;
};

// The executable for `key`, or nullptr; counts nothing.
Executable* find_executable(uint64_t key);
// Caches a new executable (or returns the one another thread cached first).
Executable* add_executable(uint64_t key, const RouteDecision& decided);
void count_hit();
void count_miss();

}  // namespace localneuron
