// The neuron device's part of torch.profiler: a Kineto activity profiler (PyTorch's PrivateUse1
// profiler registry) that the profiler starts and stops whenever ProfilerActivity.PrivateUse1 is
// requested. While it records, the executor notes every executable it runs; when the trace stops,
// Python (localneuron/profiler/kineto_bridge.py) turns those notes and the events Python recorded
// into runtime activities and estimated device activities, which this file hands to Kineto linked
// to the framework ops that issued them.
#pragma once
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>

namespace localneuron {

extern std::atomic<bool> g_trace_recording;
inline bool trace_recording() { return g_trace_recording.load(std::memory_order_relaxed); }

// Kineto's clock: nanoseconds since the Unix epoch.
int64_t trace_clock_ns();

// The innermost framework op on this thread (its Kineto correlation id), 0 outside any op.
uint64_t current_correlation_id();

// What the device did, as the trace sees it (kinds of localneuron/profiler/kineto_bridge.py).
enum class Work : int { Executable = 0, HostToDevice = 1, DeviceToHost = 2, DeviceToDevice = 3 };

// id: the executable id for Work::Executable, else -1. compiled_ns: when a cache miss finished
// compiling (0 on a hit); the work itself ran from compiled_ns (or start_ns) to end_ns.
void record_work(Work kind, int64_t id, int device, int64_t start_ns, int64_t compiled_ns, int64_t end_ns,
                 int64_t bytes);

// NEURON_RT_INSPECT_ENABLE: record the device for the whole process without torch.profiler (which then
// refuses to record the device); stop_inspect() returns the builder's work rows.
void start_inspect();
pybind11::list stop_inspect();

// Called where the host waits for the device: a scalar read (.item(), bool(tensor)) or a copy back to
// the host (.cpu()). The observer (localneuron/runtime/host_syncs.py) attributes it to the user's code;
// a torch.profiler trace that records without the neuron activity gets a hint that its device lanes
// will be missing.
enum class HostSync : int { ScalarRead = 0, CopyToHost = 1 };
void note_host_sync(HostSync kind);
void set_host_sync_observer(pybind11::object observer);

// builder(work, start_ns, end_ns, custom_config) -> (devices, resources, activities), tuples as documented in
// localneuron/profiler/kineto_bridge.py (the one definition of that contract).
void set_trace_builder(pybind11::object builder);

// Work issued now and run later by a device queue's worker (queue.h): what the issuing thread knew (its
// launch interval, framework op and thread), recorded by the worker once the work has actually run, so
// that a trace holds what executed. The device clock places it from the launch with its estimate.
struct Launch {
  bool on = false;
  Work kind = Work::Executable;
  int64_t id = -1;
  int device = 0;
  int64_t start_ns = 0, compiled_ns = 0, end_ns = 0, bytes = 0;
  uint64_t correlation = 0;
  int32_t thread = 0;
};
Launch launch_now(Work kind, int64_t id, int device, int64_t start_ns, int64_t compiled_ns, int64_t bytes);
void record_launch(const Launch& launch);

// Times one piece of device work while a trace records; costs one relaxed load otherwise.
class WorkScope {
 public:
  explicit WorkScope(Work kind) : on_(trace_recording()), kind_(kind), start_(on_ ? trace_clock_ns() : 0) {}
  void compiled() {
    if (on_) compiled_ = trace_clock_ns();
  }
  void describe(int64_t id, int device, int64_t bytes = 0) {
    id_ = id;
    device_ = device;
    bytes_ = bytes;
  }
  bool on() const { return on_; }
  // The work is queued: the worker records it when it has run (record_launch), not this scope.
  Launch hand_off() {
    if (!on_) return {};
    on_ = false;
    return launch_now(kind_, id_, device_, start_, compiled_, bytes_);
  }
  ~WorkScope() {
    if (on_) record_work(kind_, id_, device_, start_, compiled_, trace_clock_ns(), bytes_);
  }
  WorkScope(const WorkScope&) = delete;
  WorkScope& operator=(const WorkScope&) = delete;

 private:
  bool on_;
  Work kind_;
  int64_t start_;
  int64_t compiled_ = 0;
  int64_t id_ = -1;
  int device_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace localneuron
