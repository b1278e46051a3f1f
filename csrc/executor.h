// The eager executor: every ATen op on neuron tensors without a dedicated kernel lands here. Each
// op signature is "compiled" once into an executable (Python decides how it runs) and cached; a
// cache hit runs the host kernel on zero-copy aliases without touching Python.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace localneuron {

// Device: host kernel on aliases. Python: a Python routine (CPU fallback, float64 policy).
// DeviceWrapInt64: as Device, then int64 results wrap around like the int32 values Neuron computes.
enum class Route : int { Device = 0, Python = 1, DeviceWrapInt64 = 2 };

// on_miss(op, args, kwargs) -> (route, executable_id, estimated device ns per call)
// run_python(executable_id, op, args, kwargs) -> result
// on_device_failure(executable_id, op, args, kwargs, message) -> result (or raises)
void set_executor_callbacks(pybind11::object on_miss, pybind11::object run_python,
                            pybind11::object on_device_failure);
void install_executor();
// Runs a composite op ("name.overload") whole through the executor instead of its decomposition.
void route_whole(const std::string& op_name);
// Returns the previous setting; see t_device_route_only in executor.cpp.
bool set_device_route_only(bool on);

struct ExecutorCounters {
  int64_t hits, misses, executables;
};
ExecutorCounters executor_counters();
// (executable_id, calls) for every executable that ran since the last reset.
std::vector<std::tuple<int64_t, int64_t>> executable_calls();
void reset_executable_calls();
void clear_executables();

}  // namespace localneuron
