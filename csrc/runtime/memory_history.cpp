#include "runtime/memory_history.h"

#include "runtime/device_state.h"

#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace py = pybind11;

// From torch/csrc/profiler/python/combined_traceback.h, whose include of nlohmann/json is not shipped
// with torch's headers; libtorch_python exports both (the CUDA allocator's memory history uses them).
namespace torch {
std::vector<py::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace localneuron {

std::atomic<bool> g_memory_history_on{false};

namespace {

using Traceback = std::shared_ptr<torch::CapturedTraceback>;

struct TraceEntry {
  const char* action;  // memory_viz's names
  uintptr_t address;
  size_t size;
  c10::DeviceIndex device;
  int64_t time_us;
  Traceback frames;
};

struct Segment {
  size_t size, requested;
  c10::DeviceIndex device;
  bool active;
  Traceback frames;
};

std::mutex g_mutex;
std::deque<TraceEntry> g_trace;
std::map<uintptr_t, Segment> g_segments;  // the blocks seen since recording started
size_t g_max_entries = 0;
bool g_with_stacks = true;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Traceback gather() { return g_with_stacks ? torch::CapturedTraceback::gather(true, false, false) : nullptr; }

void push(TraceEntry entry) {
  g_trace.push_back(std::move(entry));
  while (g_trace.size() > g_max_entries) g_trace.pop_front();
}

py::list frames_of(const Traceback& tb, std::map<torch::CapturedTraceback*, py::object>& symbolized) {
  if (!tb) return py::list();
  auto it = symbolized.find(tb.get());
  return it == symbolized.end() ? py::list() : py::list(it->second);
}

}  // namespace

void record_memory_history(bool enabled, bool with_stacks, size_t max_entries) {
  if (enabled) torch::installCapturedTracebackPython();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_with_stacks = with_stacks;
  g_max_entries = max_entries;
  if (!enabled) {
    g_trace.clear();
    g_segments.clear();
  }
  g_memory_history_on = enabled;
}

void note_alloc(c10::DeviceIndex device, const void* address, size_t size, size_t requested, bool new_segment) {
  Traceback tb = gather();
  const auto addr = reinterpret_cast<uintptr_t>(address);
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (new_segment) push({"segment_alloc", addr, size, device, t, tb});
  push({"alloc", addr, size, device, t, tb});
  g_segments[addr] = {size, requested, device, true, tb};
}

void note_free(c10::DeviceIndex device, const void* address, size_t size) {
  Traceback tb = gather();
  const auto addr = reinterpret_cast<uintptr_t>(address);
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(g_mutex);
  push({"free_requested", addr, size, device, t, tb});
  push({"free_completed", addr, size, device, t, tb});  // a block is freed when its last user, queued work included, is done
  auto it = g_segments.find(addr);
  if (it != g_segments.end()) it->second.active = false;
}

void note_segment_free(c10::DeviceIndex device, const void* address, size_t size) {
  const auto addr = reinterpret_cast<uintptr_t>(address);
  std::lock_guard<std::mutex> lock(g_mutex);
  push({"segment_free", addr, size, device, now_us(), nullptr});
  g_segments.erase(addr);
}

py::dict memory_snapshot() {
  std::vector<TraceEntry> trace;
  std::vector<std::pair<uintptr_t, Segment>> segments;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    trace.assign(g_trace.begin(), g_trace.end());
    segments.assign(g_segments.begin(), g_segments.end());
  }
  std::vector<torch::CapturedTraceback*> unique;
  std::map<torch::CapturedTraceback*, py::object> symbolized;
  auto want = [&](const Traceback& tb) {
    if (tb && symbolized.emplace(tb.get(), py::none()).second) unique.push_back(tb.get());
  };
  for (const auto& e : trace) want(e.frames);
  for (const auto& [addr, s] : segments) want(s.frames);
  std::vector<py::object> frames = torch::py_symbolize(unique);
  for (size_t i = 0; i < unique.size(); i++) symbolized[unique[i]] = frames[i];

  py::list device_traces;
  for (int d = 0; d < device_count(); d++) device_traces.append(py::list());
  for (const auto& e : trace) {
    if (e.device < 0 || e.device >= device_count()) continue;
    py::dict entry;
    entry["action"] = e.action;
    entry["addr"] = e.address;
    entry["size"] = e.size;
    entry["stream"] = 0;
    entry["time_us"] = e.time_us;
    entry["frames"] = frames_of(e.frames, symbolized);
    device_traces[e.device].cast<py::list>().append(entry);
  }
  py::list segment_list;
  for (const auto& [addr, s] : segments) {
    py::dict block;
    block["address"] = addr;
    block["size"] = s.size;
    block["requested_size"] = s.requested;
    block["state"] = s.active ? "active_allocated" : "inactive";
    block["frames"] = frames_of(s.frames, symbolized);
    py::dict segment;
    segment["device"] = static_cast<int>(s.device);
    segment["address"] = addr;
    segment["total_size"] = s.size;
    segment["allocated_size"] = s.active ? s.size : 0;
    segment["active_size"] = s.active ? s.size : 0;
    segment["requested_size"] = s.active ? s.requested : 0;
    segment["stream"] = 0;
    segment["segment_type"] = s.size < (1 << 20) ? "small" : "large";
    segment["segment_pool_id"] = py::make_tuple(0, 0);
    segment["is_expandable"] = false;
    segment["frames"] = frames_of(s.frames, symbolized);
    segment["blocks"] = py::make_tuple(block);
    segment_list.append(segment);
  }
  py::dict out;
  out["segments"] = segment_list;
  out["device_traces"] = device_traces;
  out["allocator_settings"] = py::dict();
  return out;
}

}  // namespace localneuron
