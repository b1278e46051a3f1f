// The eager executor: every ATen op on neuron tensors without a dedicated kernel lands here. Each
// op signature is "compiled" once into an executable (Python decides how it runs) and cached; a
// cache hit runs the host kernel on zero-copy aliases without touching Python.
//
// Seams: executor_contract.h (routes and callbacks, the contract with Python), signature.* (the
// cache key), executable_cache.* (executables by key), python_bridge.* (calls into the policy),
// execution.* (the boxed entry and the device route), fast_ops.cpp (unboxed entry points for the ops whose
// records name one, op_records.py `fast`).
#pragma once
#include "executor/executor_contract.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace localneuron {

// Installs the callbacks and the executor's kernels; once per process (a second call raises).
void install_executor(ExecutorCallbacks callbacks);
void install_fast_ops();
// The unboxed entry points install_fast_ops registers: (op, overload, out overload, form) from the op records'
// `fast` fields (form: unary, tensor_scalar, binary or binary_alpha; another raises). Before install_executor.
void set_fast_ops(const std::vector<std::tuple<std::string, std::string, std::string, std::string>>& ops);
// The ops ("aten::add.Tensor") whose unboxed entry point is registered.
std::vector<std::string> fast_op_names();
// Runs a composite op ("name.overload") whole through the executor instead of its decomposition.
void route_whole(const std::string& op_name);
// Returns the previous setting; see t_device_route_only in execution.cpp.
bool set_device_route_only(bool on);

struct ExecutorCounters {
  int64_t hits, misses, executables;
};
ExecutorCounters executor_counters();
// The device's own C++ kernels (aten/kernels.cpp) that TorchNeuron's trackers list as executed ops: allocation,
// copies and metadata (its views are not listed, so they are not counted). Each counts its calls into the
// executable the Python policy registered for it (ops/tracking.py), reported with the executor's executables.
enum class CountedKernel : size_t {
  EmptyMemoryFormat, EmptyStrided, NewEmpty, ToCopy, Resize, CopyFrom, CopyFromAndResize, LocalScalarDense,
  SetSourceTensor, SetSourceStorage, SetSourceStorageOffset, SetEmpty, HasCompatibleShallowCopyType, LinearBackward,
  Count
};
// "aten::name.overload" of each CountedKernel, in its order: the name its registration gave it (name_counted_kernel).
std::vector<std::string> counted_kernel_names();
// Called by the registration of a counted kernel with the "name.overload" it registers (csrc/aten/kernels.cpp), so
// the name the tracker reports is the one registered, written once.
void name_counted_kernel(CountedKernel kernel, const char* registered);
// The executable id of each counted kernel, in counted_kernel_names()'s order; until set, calls are not counted.
void set_counted_kernel_executables(const std::vector<int64_t>& ids);
void count_kernel_call(CountedKernel kernel);
// (executable_id, calls) for every executable and counted kernel that ran since the last reset.
std::vector<std::tuple<int64_t, int64_t>> executable_calls();
void reset_executable_calls();
void clear_executables();

}  // namespace localneuron
