#include "queue/held_errors.h"

#include "runtime/device_state.h"

#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>

namespace localneuron {
namespace {

constexpr uint64_t kReportedAtExit = 0;  // a thread id no thread has: "raised" by the exit report

struct Failure {
  std::string what;  // "aten::mm(Float[4, 8], Float[8, 2]) failed: ..."
  SourceLine source;
  uint64_t issuer;
  std::vector<uint64_t> raised_in;  // the threads it was raised in
  // What the Python class of the raised error is decided from (type_of_first_failure): the op's name ("aten::mm"),
  // whether the kernel's error was an IndexError (c10::IndexError), and the kernel's message.
  std::string op;
  bool index_error = false;
  std::string message;
};

struct DeviceFailures {
  std::mutex mu;
  std::deque<Failure> held;            // in the order they happened; guarded by mu
  uint64_t not_kept = 0;               // failures past kMaxHeldFailures; guarded by mu
  std::atomic<bool> any{false};        // held is not empty: a synchronisation point's only cost otherwise
};
// Leaked on purpose: a forked child starts from fresh ones (a parent's thread may have held a lock at the fork).
DeviceFailures* g_failures = new DeviceFailures[kMaxDevices];

std::atomic<uint64_t> g_next_thread_id{kReportedAtExit + 1};

bool raised_in(const Failure& f, uint64_t thread) {
  return std::find(f.raised_in.begin(), f.raised_in.end(), thread) != f.raised_in.end();
}

std::string describe(const Failure& f, uint64_t reader) {
  return f.what + ";" + source_text(f.source) + (f.issuer != reader ? " in another thread" : "");
}

// The Python class to raise `f` as, when it is the first failure a synchronisation point raises; nullptr: the
// RuntimeError every held failure is raised as. The class is the one the same program gets at the op in blocking mode
// (where the first failure is the exception it ends with): localneuron.ops.policy.held_error_type decides, by the op
// records' kernel_error rules, in one place for both modes, which kernel errors TorchNeuron raises with another type (an index out of bounds in aten::index, as
// an instance of both IndexError and RuntimeError). Every class it gives derives from RuntimeError, so code that
// catches a held failure as RuntimeError still does. Called with the GIL held; a new reference.
PyObject* type_of_first_failure(const Failure& f) {
  if (!f.index_error) return nullptr;  // the only kernel errors with another type are IndexErrors
  PyObject* module = PyImport_ImportModule("localneuron.ops.policy");
  PyObject* type = module ? PyObject_CallMethod(module, "held_error_type", "sss", f.op.c_str(), "IndexError",
                                                f.message.c_str())
                          : nullptr;
  Py_XDECREF(module);
  if (type == nullptr || type == Py_None || !PyExceptionClass_Check(type) ||
      !PyObject_IsSubclass(type, PyExc_RuntimeError)) {
    PyErr_Clear();  // no class, or none that is a RuntimeError: the held failure's own RuntimeError
    Py_XDECREF(type);
    return nullptr;
  }
  return type;
}

const char* const kWhy =
    "Ops are asynchronous, so this surfaces at the next synchronisation point; later work that used the results saw "
    "unspecified values. The device remains usable. Run with NEURON_LAUNCH_BLOCKING=1 to raise at the op itself.";

}  // namespace

uint64_t current_thread_id() {
  thread_local const uint64_t id = g_next_thread_id.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void hold_failure(c10::DeviceIndex device, const std::string& description, const SourceLine& source, uint64_t issuer,
                  const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  std::string message = c10_error ? c10_error->what_without_backtrace() : error.what();
  Failure failure{description + " failed: " + message, source, issuer, {}};
  failure.op = description.substr(0, description.find('('));
  failure.index_error = dynamic_cast<const c10::IndexError*>(&error) != nullptr;
  failure.message = std::move(message);
  DeviceFailures& d = g_failures[device];
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.held.size() >= kMaxHeldFailures) {
    auto told = std::find_if(d.held.begin(), d.held.end(), [](const Failure& f) { return !f.raised_in.empty(); });
    if (told == d.held.end()) {
      d.not_kept++;
      return;
    }
    d.held.erase(told);
  }
  d.held.push_back(std::move(failure));
  d.any.store(true, std::memory_order_release);
}

void raise_held_failures(c10::DeviceIndex device) {
  DeviceFailures& d = g_failures[device];
  if (!d.any.load(std::memory_order_acquire)) return;
  const uint64_t me = current_thread_id();
  std::vector<Failure> told;
  uint64_t not_kept;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    for (auto it = d.held.begin(); it != d.held.end();) {
      if (raised_in(*it, me)) {
        ++it;
        continue;
      }
      told.push_back(*it);
      told.back().raised_in.clear();
      if (it->issuer == me) {
        it = d.held.erase(it);  // handled: its issuer is told
      } else {
        it->raised_in.push_back(me);
        ++it;
      }
    }
    d.any.store(!d.held.empty(), std::memory_order_release);
    not_kept = d.not_kept;
  }
  if (told.empty()) return;
  // Built outside the lock: a source line's text takes the GIL.
  std::string message = "neuron:" + std::to_string(device) + ": ";
  if (told.size() == 1) {
    message += "queued work " + describe(told[0], me) + ". ";
  } else {
    message += std::to_string(told.size()) + " queued ops failed, in this order:\n";
    for (const Failure& f : told) message += "  " + describe(f, me) + "\n";
  }
  if (not_kept > 0) {
    message += std::to_string(not_kept) + " further failed ops were not kept (more than " +
               std::to_string(kMaxHeldFailures) + " held at once). ";
  }
  message += kWhy;
  message += " A failure is raised once in each thread that synchronises, until the thread that issued it has been "
             "told.";
  if (Py_IsInitialized() && !_Py_IsFinalizing()) {
    pybind11::gil_scoped_acquire gil;
    if (PyObject* type = type_of_first_failure(told[0])) {
      PyErr_SetString(type, message.c_str());
      Py_DECREF(type);
      python_error error;  // torch/csrc/Exceptions.h (global namespace)
      error.persist();  // takes the Python error set above; torch's bindings restore it where they catch this
      throw error;
    }
  }
  TORCH_CHECK(false, message);
}

std::vector<std::string> take_unreported_failures() {
  std::vector<std::pair<int, Failure>> unreported;
  for (int device = 0; device < kMaxDevices; device++) {  // an int: a DeviceIndex (8 bits) never reaches 128
    DeviceFailures& d = g_failures[device];
    if (!d.any.load(std::memory_order_acquire)) continue;
    std::lock_guard<std::mutex> lock(d.mu);
    for (Failure& f : d.held) {
      if (!f.raised_in.empty()) continue;
      unreported.emplace_back(device, Failure{f.what, f.source, f.issuer, {}});
      f.raised_in.push_back(kReportedAtExit);
    }
  }
  std::vector<std::string> messages;
  for (const auto& [device, f] : unreported) {
    messages.push_back("neuron:" + std::to_string(device) + ": queued work " + f.what + ";" + source_text(f.source));
  }
  return messages;
}

void forget_held_failures_after_fork() { g_failures = new DeviceFailures[kMaxDevices]; }

}  // namespace localneuron
