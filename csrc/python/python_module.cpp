// The Python face of the C++ core: localneuron._C.
#include "runtime/alias.h"
#include "runtime/allocator.h"
#include "runtime/device_state.h"
#include "executor/executor.h"
#include "fusion/fusion.h"
#include "runtime/generator.h"
#include "profiler/line_sampler.h"
#include "runtime/memory_history.h"
#include "executor/operand_devices.h"
#include "executor/signature.h"
#include "runtime/pinned_host.h"
#include "runtime/guard.h"
#include "runtime/source_line.h"
#include "queue/held_errors.h"
#include "queue/queue.h"
#include "profiler/trace_plugin.h"
#include "runtime/transfer_stats.h"

#include <ATen/ScalarOps.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdio>
#include <cstdlib>

namespace py = pybind11;
using namespace localneuron;

// Waits until each device's autograd thread has let go of its last backward pass (see
// localneuron/device/shutdown.py). The pass issued here is built from C++ kernels only (empty, view),
// so it owns no Python object and its own release needs no interpreter.
static void drain_autograd_device_threads() {
  py::gil_scoped_release no_gil;
  // the engine has a thread for the devices PyTorch counts (device_count_for_pytorch), not for a 128th
  for (int d = 0; d < device_count_for_pytorch(); d++) {
    const auto options = at::TensorOptions().device(kNeuron, static_cast<c10::DeviceIndex>(d));
    at::Tensor leaf = at::empty({1}, options).requires_grad_(true);
    torch::autograd::backward({leaf.view({1})}, {at::empty({1}, options)});
  }
}

// The process ends with failures of queued work that no thread was told of (queue/held_errors.h): once the
// interpreter has finished (every atexit handler ran, output was flushed), the exit status becomes 1.
static void exit_with_status_one() {
  std::fflush(nullptr);
  std::exit(1);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "localneuron C++ core: allocator, device guard, hooks, aliases and the eager executor";

  m.def("configure_devices", &configure_devices, py::arg("count"), py::arg("hbm_bytes_per_core"), py::arg("target"));
  m.def("device_count", [] { return device_count(); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int64_t d) { set_current_device(checked_index(d)); });
  m.def("runtime_initialized", &runtime_initialized);
  m.def("drain_autograd_device_threads", &drain_autograd_device_threads);
  m.def("mark_runtime_initialized", &mark_runtime_initialized);
  m.def("mark_forked_child", [] {
    mark_forked_child();
    forget_queues_after_fork();
  });
  m.def("set_launch_blocking", &set_launch_blocking, "NEURON_LAUNCH_BLOCKING: run every op when it is issued");
  m.def("set_run_in_place_limits", &set_run_in_place_limits, py::arg("max_bytes") = -1, py::arg("max_ns") = -1,
        "queued work whose host kernel measured at most max_ns (before a measurement: touching at most max_bytes) "
        "runs on the issuing thread when its stream is idle; -1 restores a default");
  m.attr("RUN_IN_PLACE_MAX_BYTES") = kRunInPlaceMaxBytes;
  m.attr("RUN_IN_PLACE_MAX_NS") = kRunInPlaceMaxNs;
  m.def("synchronize", [](int64_t d) { synchronize_device(checked_index(d)); },
        "Waits for the device's queued work and raises its failures this thread was not told of");
  m.def("drain_all_queues", &drain_all_devices);
  m.def("synchronize_all", &synchronize_all_devices);
  m.def("enqueue_busy_period", [](int64_t d, double seconds) { enqueue_busy_period(checked_index(d), seconds); });
  m.def("shutdown_queues", &shutdown_queues);
  m.def("take_unreported_failures", &take_unreported_failures,
        "The failures of queued work no thread was told of, as messages (each now counted as reported)");
  m.def("exit_with_status_one_when_finalized", [] {
    static const bool registered = Py_AtExit(&exit_with_status_one) == 0;
    TORCH_CHECK(registered, "could not register the exit status of failed queued work");
  });
  m.def("set_library_rule", &set_library_rule, py::arg("is_library"),
        "is_library(filename) -> bool: the one rule for which frames are library code (runtime/source_line.h)");
  m.def("set_new_stream_rule", &set_new_stream_rule, py::arg("new_streams_are_distinct"),
        "new_streams_are_distinct() -> bool, asked at each stream's creation: false gives the default stream "
        "(TorchNeuron's single-stream mode; runtime/guard.h)");

  m.def("format_bytes", &format_bytes, py::arg("bytes"), "the one byte formatter (runtime/allocator.h)");
  m.def("memory_counters", [](int64_t d) {
    const c10::DeviceIndex device = checked_index(d);
    drain_device(device);  // the statistics after queued frees
    const MemoryCounters c = memory_counters(device);
    py::dict out;
    out["allocated_current"] = c.allocated_current;
    out["allocated_peak"] = c.allocated_peak;
    out["allocated_total"] = c.allocated_total;
    out["freed_total"] = c.freed_total;
    out["reserved_current"] = c.reserved_current;
    out["reserved_peak"] = c.reserved_peak;
    out["reserved_total"] = c.reserved_total;
    out["reserved_freed_total"] = c.reserved_freed_total;
    out["alloc_requests"] = c.alloc_requests;
    out["tensor_frees"] = c.tensor_frees;
    out["alloc_retries"] = c.alloc_retries;
    out["ooms"] = c.ooms;
    out["capacity"] = c.capacity;
    return out;
  });
  m.def("reset_peak_memory", [](int64_t d) {
    const c10::DeviceIndex device = checked_index(d);
    drain_device(device);
    reset_peak(device);
  });
  m.def("reset_accumulated_memory", [](int64_t d) {
    const c10::DeviceIndex device = checked_index(d);
    drain_device(device);
    reset_accumulated(device);
  });
  m.def("empty_cache", [](int64_t d) {
    const c10::DeviceIndex device = checked_index(d);
    drain_device(device);
    empty_cache(device);
  });

  m.def("host_memory_counters", [] {
    const HostMemoryCounters c = host_memory_counters();
    py::dict out;
    const auto stat = [&](const char* name, const HostStat& s) {
      py::dict d;
      d["current"] = s.current;
      d["peak"] = s.peak;
      d["allocated"] = s.allocated;
      d["freed"] = s.freed;
      out[name] = d;
    };
    stat("allocations", c.allocations);
    stat("allocated_bytes", c.allocated_bytes);
    stat("active_requests", c.active_requests);
    stat("active_bytes", c.active_bytes);
    out["num_host_alloc"] = c.num_host_alloc;
    out["num_host_free"] = c.num_host_free;
    out["locked_bytes"] = c.locked_bytes;
    out["lock_refusals"] = c.lock_refusals;
    return out;
  });
  m.def("reset_host_peak_memory", &reset_host_peak);
  m.def("reset_host_accumulated_memory", &reset_host_accumulated);
  m.def("empty_host_cache", &empty_host_cache);

  m.def("transfer_counters", [] {
    const TransferCounters c = transfer_counters();
    py::dict out;
    out["host_to_device_bytes"] = c.host_to_device_bytes;
    out["device_to_host_bytes"] = c.device_to_host_bytes;
    out["device_to_device_bytes"] = c.device_to_device_bytes;
    out["copies"] = c.copies;
    return out;
  });
  m.def("reset_transfer_counters", &reset_transfer_counters);

  // Python code that reads or writes device data through an alias (compiled graphs, collectives, NKI)
  // needs the device's queued work done first.
  m.def("cpu_alias", [](const at::Tensor& t) {
    if (t.defined() && t.is_privateuseone()) synchronize_device(t.device().index());
    return cpu_alias(t);
  });
  m.def("adopt", &adopt, py::arg("host"), py::arg("device"));
  m.def("default_generator", [](int64_t d) { return default_generator(checked_index(d)); });

  py::enum_<Route>(m, "Route", "How an executable runs (csrc/executor/executor_contract.h)")
      .value("DEVICE", Route::Device)
      .value("PYTHON", Route::Python)
      .value("DEVICE_WRAP_INT64", Route::DeviceWrapInt64);
  m.def(
      "install_executor",
      [](py::object on_miss, py::object run_python, py::object on_device_failure, py::object on_kernel_refusal,
         py::object on_strided_write, const std::vector<std::string>& ops_shaped_by_scalars,
         const std::vector<std::tuple<std::string, std::string, std::string, std::string>>& fast_ops) {
        set_fast_ops(fast_ops);
        install_executor({std::move(on_miss), std::move(run_python), std::move(on_device_failure),
                          std::move(on_kernel_refusal), std::move(on_strided_write)});
        set_ops_shaped_by_scalars(ops_shaped_by_scalars);
      },
      py::kw_only(), py::arg("on_miss"), py::arg("run_python"), py::arg("on_device_failure"), py::arg("on_kernel_refusal"),
      py::arg("on_strided_write"), py::arg("ops_shaped_by_scalars"), py::arg("fast_ops"),
      "Installs the executor, its policy callbacks (csrc/executor/executor_contract.h), the ops whose Scalar "
      "arguments set their output shape (their values join the signature, csrc/executor/signature.h) and the "
      "ops with unboxed entry points, (op, overload, out overload, form) (csrc/executor/fast_ops.cpp); both "
      "from the op records; once per process.");
  m.def("fast_ops", &fast_op_names, "The ops ('aten::add.Tensor') whose unboxed entry point is registered.");
  m.def(
      "signature",
      [](const std::string& name, const std::string& overload, const py::args& args, const py::kwargs& kwargs) {
        const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
        const std::vector<c10::Argument>& arguments = op.schema().arguments();
        py::list passed;
        for (size_t i = 0; i < args.size(); i++) {
          const py::handle a = args[i];
          const bool number = PyBool_Check(a.ptr()) || PyLong_Check(a.ptr()) || PyFloat_Check(a.ptr()) ||
                              PyComplex_Check(a.ptr());
          if (number && i < arguments.size() && arguments[i].type()->kind() == c10::TypeKind::TensorType) {
            // a Python number where a Tensor is expected, wrapped as PyTorch's argument parser wraps it (x * 2.5)
            passed.append(py::cast(at::native::wrapped_scalar_tensor(
                torch::jit::toIValue(a, c10::NumberType::get()).toScalar())));
          } else {
            passed.append(a);
          }
        }
        return signature(op, torch::jit::createStackForSchema(op.schema(), py::args(passed), kwargs, std::nullopt), 0);
      },
      "signature(name, overload, *args, **kwargs): the eager signature of a call (tests of csrc/executor/signature.h).");
  bind_fusion(m);
  m.def("route_whole", &route_whole);
  m.def("set_device_route_only", &set_device_route_only);
  m.def("executor_counters", [] {
    const ExecutorCounters c = executor_counters();
    return py::make_tuple(c.hits, c.misses, c.executables);
  });
  m.def("counted_kernel_names", &counted_kernel_names,
        "The device's own C++ kernels ('aten::empty_strided') whose calls are counted as executed ops.");
  m.def("set_counted_kernel_executables", &set_counted_kernel_executables,
        "The executable id of each counted kernel, in counted_kernel_names()'s order (ops/tracking.py).");
  m.def("executable_calls", &executable_calls);
  m.def("reset_executable_calls", &reset_executable_calls);
  m.def("clear_executables", [] {
    drain_all_devices();  // queued work refers to them
    clear_executables();
  });
  py::enum_<Execution>(m, "Execution", "When an executable runs (csrc/executor/executor_contract.h)")
      .value("SYNCHRONOUS", Execution::Synchronous)
      .value("QUEUED", Execution::Queued)
      .value("METADATA", Execution::Metadata);
  m.def("cross_device_errors", &cross_device_errors);
  m.def("reset_cross_device_errors", &reset_cross_device_errors);

  m.def("set_trace_builder", &set_trace_builder);
  m.def("trace_recording", &trace_recording);
  m.def("trace_clock_ns", &trace_clock_ns);
  m.def("current_correlation_id", &current_correlation_id);
  m.def("set_host_sync_observer", &set_host_sync_observer);
  m.def("start_inspect", &start_inspect);
  m.def("record_memory_history", &record_memory_history);
  m.def("memory_snapshot", [] {
    drain_all_devices();  // the blocks after queued frees
    return memory_snapshot();
  });
  m.def("stop_inspect", &stop_inspect);
  m.def("set_line_sampler", &set_line_sampler);
  m.def("line_samples", &line_samples, py::arg("clear"));
  m.def("line_sample_count", &line_sample_count);
  m.def("note_device_time", &note_device_time);
}
