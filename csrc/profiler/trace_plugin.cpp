// Kineto's activity headers format metadata with fmt, which torch links privately: compile it here.
#define FMT_HEADER_ONLY
#include "profiler/trace_plugin.h"

#include "runtime/device_state.h"
#include "queue/queue.h"

#include <torch/csrc/utils/pybind.h>

// PyTorch's PrivateUse1 profiler registry is compiled only for Kineto builds, which every torch
// wheel is; its header needs the macro that the torch build itself had.
#ifndef USE_KINETO
#define USE_KINETO
#endif
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace py = pybind11;

namespace localneuron {

std::atomic<bool> g_trace_recording{false};

namespace {

// A trace without ProfilerActivity.PrivateUse1 has CPU ops only (docs/support-matrix.md#profiling): said once, when it
// starts in a process that uses the device or when the program reads device data while it records.
void hint_missing_device_activity() {
  TORCH_WARN_ONCE("torch.profiler is recording without ProfilerActivity.PrivateUse1, so the trace has no neuron "
                  "runtime or device events (only CPU ops). Profile with activities=[ProfilerActivity.CPU, "
                  "ProfilerActivity.PrivateUse1], as TorchNeuron requires.");
}

struct WorkRecord {
  Work kind;
  int64_t id;
  int device;
  int64_t start_ns, compiled_ns, end_ns, bytes;
  uint64_t correlation;
  int32_t thread;
};

std::mutex g_work_mutex;
// NEURON_RT_INSPECT_ENABLE: the device records for the whole process, without torch.profiler
std::atomic<bool> g_inspecting{false};
std::vector<WorkRecord> g_work;
py::object* g_builder = nullptr;  // process lifetime, like the executor's callbacks

// Kineto forwards each framework op's correlation id to the sessions of its activity profilers.
thread_local std::vector<uint64_t> t_correlations;
thread_local std::vector<uint64_t> t_user_correlations;

// Kineto keeps pointers to the device and resource descriptions until the trace is saved, which may
// be after later traces: they are interned for the life of the process (a few per NeuronCore).
std::mutex g_info_mutex;
std::map<std::pair<int64_t, std::string>, std::unique_ptr<libkineto::DeviceInfo>> g_device_infos;
std::map<std::pair<int64_t, int64_t>, std::unique_ptr<libkineto::ResourceInfo>> g_resource_infos;

const libkineto::DeviceInfo& intern_device(int64_t id, int64_t sort, const std::string& name, const std::string& label) {
  std::lock_guard<std::mutex> lock(g_info_mutex);
  auto& slot = g_device_infos[{id, name}];
  if (!slot) slot.reset(new libkineto::DeviceInfo{id, sort, name, label});
  return *slot;
}

const libkineto::ResourceInfo& intern_resource(int64_t device, int64_t id, int64_t sort, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_info_mutex);
  auto& slot = g_resource_infos[{device, id}];
  if (!slot || slot->name != name) slot.reset(new libkineto::ResourceInfo{id, sort, device, name});
  return *slot;
}

// Activity kinds of the builder's contract (localneuron/profiler/kineto_bridge.py).
libkineto::ActivityType activity_type(int kind) {
  switch (kind) {
    case 0:
      return libkineto::ActivityType::PRIVATEUSE1_RUNTIME;
    case 1:
      return libkineto::ActivityType::CONCURRENT_KERNEL;
    case 2:
      return libkineto::ActivityType::GPU_MEMCPY;
    default:
      TORCH_CHECK(false, "localneuron trace builder: unknown activity kind ", kind);
  }
}

// The work noted so far, as the builder's rows; the caller holds the GIL.
py::list take_work() {
  std::vector<WorkRecord> work;
  {
    std::lock_guard<std::mutex> lock(g_work_mutex);
    work.swap(g_work);
  }
  py::list rows;
  for (const WorkRecord& w : work) {
    rows.append(py::make_tuple(static_cast<int>(w.kind), w.id, w.device, w.start_ns, w.compiled_ns, w.end_ns,
                               w.bytes, w.correlation, w.thread));
  }
  return rows;
}

class NeuronTraceSession : public libkineto::IActivityProfilerSession {
 public:
  // custom_config: _ExperimentalConfig(custom_profiler_config=...), as torch_neuronx.profiling.NeuronConfig sets it
  explicit NeuronTraceSession(std::string custom_config) : custom_config_(std::move(custom_config)) {}

  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_work_mutex);
      g_work.clear();
    }
    start_ns_ = trace_clock_ns();
    g_trace_recording = true;
  }

  void stop() override {
    drain_all_devices();  // profiler export is a synchronisation point: queued launches record as they run
    g_trace_recording = false;
    end_ns_ = trace_clock_ns();
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, start_ns_, end_ns_);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "neuron");
    if (g_builder == nullptr) return;
    py::gil_scoped_acquire gil;
    try {
      py::tuple built = (*g_builder)(take_work(), start_ns_, end_ns_, custom_config_);
      for (py::handle d : built[0]) {
        auto t = d.cast<std::tuple<int64_t, int64_t, std::string, std::string>>();
        logger.handleDeviceInfo(intern_device(std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)),
                                start_ns_);
      }
      for (py::handle r : built[1]) {
        auto t = r.cast<std::tuple<int64_t, int64_t, int64_t, std::string>>();
        logger.handleResourceInfo(intern_resource(std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)),
                                  start_ns_);
      }
      int32_t next_id = 1;
      for (py::handle a : built[2]) {
        auto t = a.cast<std::tuple<int, std::string, int64_t, int64_t, int64_t, int64_t, int64_t, py::dict, int64_t,
                                   bool>>();
        buffer_->emplace_activity(buffer_->span, activity_type(std::get<0>(t)), std::get<1>(t));
        libkineto::GenericTraceActivity& act = *buffer_->activities.back();
        act.device = static_cast<int32_t>(std::get<2>(t));
        act.resource = static_cast<int32_t>(std::get<3>(t));
        act.startTime = std::get<4>(t);
        act.endTime = std::get<5>(t);
        act.id = next_id++;
        const int64_t correlation = std::get<6>(t);
        if (correlation > 0) act.linked = linked(static_cast<int32_t>(correlation));
        if (std::get<8>(t) > 0) {
          act.flow.id = static_cast<uint32_t>(std::get<8>(t));
          act.flow.type = libkineto::kLinkAsyncCpuGpu;
          act.flow.start = std::get<9>(t);
        }
        for (auto item : std::get<7>(t)) {
          act.addMetadata(item.first.cast<std::string>(), item.second.cast<std::string>());
        }
        logger.handleGenericActivity(act);
      }
    } catch (const std::exception& e) {
      errors_.push_back(std::string("neuron device trace: ") + e.what());
      TORCH_WARN("localneuron: the neuron device trace could not be built: ", e.what());
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlations.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlations.empty()) t_correlations.pop_back();
  }
  void pushUserCorrelationId(uint64_t id) override { t_user_correlations.push_back(id); }
  void popUserCorrelationId() override {
    if (!t_user_correlations.empty()) t_user_correlations.pop_back();
  }

 private:
  std::string custom_config_;
  int64_t start_ns_ = 0, end_ns_ = 0;
  std::vector<std::string> errors_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class NeuronActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& requested,
                                                                 const libkineto::Config& config) override {
    // PyTorch asks every trace for the PrivateUse1 runtime type (it counts as a CPU activity); the
    // device kernels type comes only with ProfilerActivity.PrivateUse1. Without it: CPU ops only.
    TORCH_CHECK(!g_inspecting, "torch.profiler cannot record the neuron device while NEURON_RT_INSPECT_ENABLE=1 "
                "captures it for the whole process (TorchNeuron's documentation: do not combine the two). Unset "
                "NEURON_RT_INSPECT_ENABLE to use torch.profiler, or drop ProfilerActivity.PrivateUse1.");
    if (requested.count(libkineto::ActivityType::CONCURRENT_KERNEL)) {
      return std::make_unique<NeuronTraceSession>(config.getCustomConfig());
    }
    if (runtime_initialized()) hint_missing_device_activity();
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& requested,
                                                                 const libkineto::Config& config) override {
    return configure(requested, config);
  }

 private:
  const std::string name_ = "neuron";
  const std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                         libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace

int64_t trace_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t current_correlation_id() {
  if (!t_correlations.empty()) return t_correlations.back();
  return t_user_correlations.empty() ? 0 : t_user_correlations.back();
}

void record_work(Work kind, int64_t id, int device, int64_t start_ns, int64_t compiled_ns, int64_t end_ns,
                 int64_t bytes) {
  const WorkRecord w{kind, id, device, start_ns, compiled_ns, end_ns, bytes, current_correlation_id(),
                     libkineto::systemThreadId()};
  std::lock_guard<std::mutex> lock(g_work_mutex);
  g_work.push_back(w);
}

Launch launch_now(Work kind, int64_t id, int device, int64_t start_ns, int64_t compiled_ns, int64_t bytes) {
  return {true, kind, id, device, start_ns, compiled_ns, trace_clock_ns(), bytes, current_correlation_id(),
          libkineto::systemThreadId()};
}

void record_launch(const Launch& l) {
  const WorkRecord w{l.kind, l.id, l.device, l.start_ns, l.compiled_ns, l.end_ns, l.bytes, l.correlation, l.thread};
  std::lock_guard<std::mutex> lock(g_work_mutex);
  g_work.push_back(w);
}

py::object* g_sync_observer = nullptr;  // process lifetime, like the executor's callbacks

void note_host_sync(HostSync kind) {
  if (g_sync_observer != nullptr && !g_sync_observer->is_none() && Py_IsInitialized()) {
    py::gil_scoped_acquire gil;
    (*g_sync_observer)(static_cast<int>(kind));
  }
  if (!trace_recording() && torch::profiler::impl::profilerEnabled()) hint_missing_device_activity();
}

void start_inspect() {
  TORCH_CHECK(!g_trace_recording, "NEURON_RT_INSPECT_ENABLE capture cannot start while torch.profiler records the "
              "neuron device; do not combine the two.");
  {
    std::lock_guard<std::mutex> lock(g_work_mutex);
    g_work.clear();
  }
  g_inspecting = true;
  g_trace_recording = true;
}

py::list stop_inspect() {
  drain_all_devices();
  g_trace_recording = false;
  g_inspecting = false;
  return take_work();
}

// Installed once, at registration, like the executor's callbacks (csrc/executor/executor_contract.h): what runs
// is what registration installed.
void set_host_sync_observer(py::object observer) {
  TORCH_CHECK(g_sync_observer == nullptr, "localneuron: the host-sync observer is already installed");
  g_sync_observer = new py::object(std::move(observer));
}

void set_trace_builder(py::object builder) {
  TORCH_CHECK(g_builder == nullptr, "localneuron: the trace builder is already installed");
  g_builder = new py::object(std::move(builder));
}

}  // namespace localneuron
