#include "profiler/line_sampler.h"

#include "runtime/source_line.h"

#include <frameobject.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <unordered_map>

namespace py = pybind11;

namespace localneuron {

thread_local int64_t t_ns_until_line_sample = 0;

namespace {

py::object* g_sampler = nullptr;  // process lifetime, like the executor's callbacks
std::atomic<int64_t> g_mean_gap_ns{-1};  // -1: off
std::atomic<bool> g_bounded_cost{false};
std::atomic<int64_t> g_sample_count{0};
// The share of a thread's time its samples may take when the cost is bounded, and how far its gap widens.
constexpr int64_t kMaxSampleShareDivisor = 200;  // 0.5%
constexpr int kMaxGapDoublings = 10;
// While sampling is off, a thread looks again after this much device time (so switching it on is seen).
constexpr int64_t kIdleRecheckNs = 1'000'000'000;
constexpr int kSitesPerSample = 2;  // the innermost user frame and its caller (localneuron/runtime/call_sites.py)

thread_local std::mt19937_64 t_rng{std::random_device{}()};
thread_local bool t_armed = false;  // the thread's first sample point is drawn, not at its first op
thread_local int t_gap_doublings = 0;
thread_local int64_t t_gap_mean_ns = 0;       // the mean the current gap was drawn with: what its sample credits
thread_local int64_t t_last_sample_at_ns = 0;  // steady clock, at the end of the thread's previous sample

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t next_gap(int64_t mean_ns) {
  std::exponential_distribution<double> gap(1.0 / static_cast<double>(mean_ns));
  return static_cast<int64_t>(gap(t_rng)) + 1;
}

// A sample's frames. Samples record instruction offsets; line_samples() turns them into lines, since finding
// a line scans the code's line table (most of a sample's cost when each sample looked it up).
struct Site {
  PyCodeObject* code[kSitesPerSample] = {nullptr, nullptr};
  int at[kSitesPerSample] = {0, 0};  // instruction offset, or line
  bool operator==(const Site& o) const {
    return std::equal(code, code + kSitesPerSample, o.code) && std::equal(at, at + kSitesPerSample, o.at);
  }
};

struct SiteHash {
  size_t operator()(const Site& s) const {
    size_t h = 0;
    for (int i = 0; i < kSitesPerSample; ++i) {
      h = h * 1000003u ^ std::hash<const void*>()(s.code[i]) ^ (static_cast<size_t>(s.at[i]) << 20);
    }
    return h;
  }
};

std::mutex g_table_mutex;
std::unordered_map<Site, int64_t, SiteHash> g_table;

// The innermost user frames of this thread (runtime/source_line.h); false if it has none. Holds the GIL.
bool user_site(Site* site) {
  SourceLine frames[kSitesPerSample];
  const int found = user_frames(frames, kSitesPerSample);
  for (int i = 0; i < found; ++i) {
    site->code[i] = static_cast<PyCodeObject*>(frames[i].code);
    site->at[i] = frames[i].lasti;
  }
  return found > 0;
}

// Credits `credited` to the issuing line (or hands it to the Python sampler).
void record_sample(int64_t credited) {
  py::gil_scoped_acquire gil;
  if (g_sampler->is_none()) return;
  try {
    Site site;
    if (user_site(&site)) {
      std::lock_guard<std::mutex> lock(g_table_mutex);
      g_table[site] += credited;
    } else {
      (*g_sampler)(credited);
    }
  } catch (py::error_already_set& e) {
    // an op must not fail because its time could not be attributed
    e.discard_as_unraisable("localneuron source-line sampler");
  }
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
    g_sample_count.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (!t_armed) {
      t_armed = true;
      t_gap_doublings = 0;
      t_gap_mean_ns = mean;
      t_ns_until_line_sample += next_gap(mean);
    }
    int64_t samples = 0;  // one op can span several gaps
    while (t_ns_until_line_sample <= 0) {
      credited += t_gap_mean_ns;
      t_ns_until_line_sample += next_gap(t_gap_mean_ns);
      ++samples;
    }
    g_sample_count.fetch_add(samples, std::memory_order_relaxed);
  }
  if (credited <= 0) return;
  const int64_t started_at = steady_ns();
  record_sample(credited);
  if (mean > 0 && g_bounded_cost.load(std::memory_order_relaxed)) {
    const int64_t ended_at = steady_ns();
    const int64_t cost = ended_at - started_at, since_previous = ended_at - t_last_sample_at_ns;
    t_last_sample_at_ns = ended_at;
    const int before = t_gap_doublings;
    if (cost * kMaxSampleShareDivisor > since_previous && t_gap_doublings < kMaxGapDoublings) {
      ++t_gap_doublings;
    } else if (cost * kMaxSampleShareDivisor * 4 < since_previous && t_gap_doublings > 0) {
      --t_gap_doublings;
    }
    if (t_gap_doublings != before) {
      t_gap_mean_ns = mean << t_gap_doublings;
      t_ns_until_line_sample = next_gap(t_gap_mean_ns);
    }
  }
}

void set_line_sampler(py::object sampler, int64_t mean_gap_ns, bool bounded_cost) {
  if (g_sampler == nullptr) g_sampler = new py::object();
  const bool off = sampler.is_none();
  *g_sampler = std::move(sampler);
  g_mean_gap_ns = off ? -1 : std::max<int64_t>(mean_gap_ns, 0);
  g_bounded_cost = bounded_cost;
  g_sample_count = 0;
  t_ns_until_line_sample = 0;
  t_armed = false;
}

py::list line_samples(bool clear) {
  std::unordered_map<Site, int64_t, SiteHash> table;
  {
    std::lock_guard<std::mutex> lock(g_table_mutex);
    if (clear) {
      g_sample_count = 0;
      table.swap(g_table);
    } else {
      table = g_table;
    }
  }
  // Sites by line: several instruction offsets share one.
  std::unordered_map<Site, int64_t, SiteHash> by_line;
  for (const auto& [site, ns] : table) {
    Site lines = site;
    for (int i = 0; i < kSitesPerSample; ++i) {
      if (site.code[i] != nullptr) lines.at[i] = PyCode_Addr2Line(site.code[i], site.at[i]);
    }
    by_line[lines] += ns;
  }
  py::list rows;
  for (const auto& [site, ns] : by_line) {
    py::object caller = site.code[1] ? py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(site.code[1]))
                                     : py::none();
    rows.append(py::make_tuple(py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(site.code[0])),
                               site.at[0], caller, site.at[1], ns));
  }
  return rows;
}

int64_t line_sample_count() { return g_sample_count.load(std::memory_order_relaxed); }

}  // namespace localneuron
