// Failures of queued work, held for the device's synchronisation points. The rule, in full:
//
// - Every failed op is held as its own failure (its op and input signature, what went wrong, the user's line
//   that issued it, the thread that issued it), including each failed op of an Adaptive Eager run and work that
//   ran in place with queued semantics. A device keeps up to kMaxHeldFailures; past that, failures already
//   raised somewhere make room, and failures beyond even that are counted and the count is reported.
// - A synchronisation point of a device in a thread (torch.neuron.synchronize(), a stream's or an event's
//   synchronize(), a host read of any tensor of the device, an op that waits for the device's queue) raises
//   every held failure of that device the thread has not raised yet, all in one RuntimeError, in the order they
//   happened. A failure is raised at most once in each thread. Its Python class is the first failure's class in
//   blocking mode where TorchNeuron's kernel gives it another type (localneuron/ops/lowering_errors.py: an index out
//   of bounds in aten::index, IndexAndRuntimeError); every such class derives from RuntimeError.
// - A failure is handled, and forgotten, once it has been raised in the thread that issued the failed op: that
//   thread now knows that what it issued since is unspecified, as a CUDA context reset tells a program. Until
//   then every other thread that synchronises is told too (it may have read the failed op's results). If the
//   issuing thread ends without synchronising, the failure stays for the rest of the process.
// - A process whose failures were never raised in any thread when it ends prints them (op, signature, line) and
//   exits with status 1, as the same program in blocking mode would have ended with the op's exception.
//
// CUDA's sticky errors are raised by every later call in every thread until the context is reset. TorchNeuron's
// documentation says only that asynchronous execution reports an error at a later synchronisation point (and
// that NEURON_LAUNCH_BLOCKING=1 reports it at the op); it is silent on threads, on several failures and on the
// exit status, so this rule narrows CUDA's: sticky until the issuing thread has been told, once per thread.
#pragma once
#include "runtime/source_line.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace localneuron {

constexpr size_t kMaxHeldFailures = 64;

// A process-unique id of the calling thread (thread ids of the system are reused after a thread ends).
uint64_t current_thread_id();

// Holds the failure `error` of the op `description` ("aten::mm(Float[4, 8], Float[8, 2])"), issued at `source`
// by the thread `issuer` (current_thread_id() there).
void hold_failure(c10::DeviceIndex device, const std::string& description, const SourceLine& source, uint64_t issuer,
                  const std::exception& error);

// Raises the held failures of `device` that the calling thread has not raised yet (see above).
void raise_held_failures(c10::DeviceIndex device);

// The held failures that no thread has raised, as messages, each now counted as raised; at the end of a process.
std::vector<std::string> take_unreported_failures();

// In a forked child: the parent's failures are the parent's to report.
void forget_held_failures_after_fork();

}  // namespace localneuron
