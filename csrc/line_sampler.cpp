#include "line_sampler.h"

#include <algorithm>
#include <atomic>
#include <random>

namespace py = pybind11;

namespace localneuron {

thread_local int64_t t_ns_until_line_sample = 0;

namespace {

py::object* g_sampler = nullptr;  // process lifetime, like the executor's callbacks
std::atomic<int64_t> g_mean_gap_ns{-1};  // -1: off
// While sampling is off, a thread looks again after this much device time (so switching it on is seen).
constexpr int64_t kIdleRecheckNs = 1'000'000'000;

thread_local std::mt19937_64 t_rng{std::random_device{}()};
thread_local bool t_armed = false;  // the thread's first sample point is drawn, not at its first op

int64_t next_gap(int64_t mean_ns) {
  std::exponential_distribution<double> gap(1.0 / static_cast<double>(mean_ns));
  return static_cast<int64_t>(gap(t_rng)) + 1;
}

}  // namespace

void take_line_samples(int64_t estimated_ns) {
  const int64_t mean = g_mean_gap_ns.load(std::memory_order_relaxed);
  if (mean < 0 || g_sampler == nullptr || !Py_IsInitialized()) {
    t_ns_until_line_sample = kIdleRecheckNs;
    return;
  }
  int64_t credited = 0;
  if (mean == 0) {
    credited = estimated_ns;
    t_ns_until_line_sample = 0;
  } else {
    if (!t_armed) {
      t_armed = true;
      t_ns_until_line_sample += next_gap(mean);
    }
    while (t_ns_until_line_sample <= 0) {
      credited += mean;
      t_ns_until_line_sample += next_gap(mean);
    }
  }
  if (credited <= 0) return;
  py::gil_scoped_acquire gil;
  if (!g_sampler->is_none()) (*g_sampler)(credited);
}

void set_line_sampler(py::object sampler, int64_t mean_gap_ns) {
  if (g_sampler == nullptr) g_sampler = new py::object();
  const bool off = sampler.is_none();
  *g_sampler = std::move(sampler);
  g_mean_gap_ns = off ? -1 : std::max<int64_t>(mean_gap_ns, 0);
  t_ns_until_line_sample = 0;
  t_armed = false;
}

}  // namespace localneuron
