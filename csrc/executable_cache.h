// Executables by signature: the process-wide cache and a lock-free per-thread copy for hits.
#pragma once
#include "executor_contract.h"

#include <atomic>
#include <cstdint>

namespace localneuron {

struct Executable {
  Route route;
  Execution execution;
  int64_t id;         // the Python policy's handle for it (ops/tracking.py)
  int64_t estimated_ns;  // per call on the simulated target, for the report's time by source line
  int generator_arg;  // position of an optional Generator argument, or -1
  std::atomic<int64_t> calls{0};
};

// The executable for `key`, or nullptr; counts nothing.
Executable* find_executable(uint64_t key);
// Caches a new executable (or returns the one another thread cached first).
Executable* add_executable(uint64_t key, const RouteDecision& decided, int generator_arg);
void count_hit();
void count_miss();

}  // namespace localneuron
