// Executables on the device queue. A queued op must hand its results to Python before it runs, so
// each (signature, strides of non-contiguous inputs) learns its output layout from its first,
// synchronous run: which results are new tensors (sizes, strides, dtype), which are in-place inputs.
// Later calls allocate those outputs and enqueue the host kernel, which fills them.
#pragma once
#include "executor/executable_cache.h"
#include "profiler/trace_plugin.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

namespace localneuron {

// RunInPlace: small work on an idle stream (queue.h run_or_enqueue); the caller runs it now on the
// device route and, should it fail, hands the failure to hold_in_place_failure.
enum class Enqueued { Yes, UnknownOutputs, NotQueueable, RunInPlace };

// Enqueues the op (its results replace the arguments stack[begin:]) if its outputs are known.
// The trace records the enqueued op when a worker has run it (WorkScope::hand_off).
Enqueued enqueue_executable(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin,
                            const Executable& exe, uint64_t key, WorkScope& trace);
// An op that ran in place failed: as a queued op's would, its error waits for the next
// synchronisation point and its results (the arguments stack[begin:] are replaced) are allocated unfilled.
void hold_in_place_failure(const c10::OperatorHandle& op, const c10::SmallVector<c10::IValue, 8>& arguments,
                           torch::jit::Stack* stack, size_t begin, const Executable& exe, uint64_t key,
                           const std::exception& error);
// After a synchronous run: `arguments` were the op's arguments, `stack` ends with its results.
void learn_outputs(const c10::OperatorHandle& op, const c10::SmallVector<c10::IValue, 8>& arguments,
                   const torch::jit::Stack& stack, uint64_t key);
// The op did not run on the device: its calls with these arguments stay synchronous.
void forget_outputs(const c10::OperatorHandle& op, const c10::SmallVector<c10::IValue, 8>& arguments, uint64_t key);

// The layout key over two tensors, as enqueue_executable computes it for (a, b, ...).
uint64_t layout_key(uint64_t key, const at::Tensor& a, const at::Tensor& b);

// The output of a queued binary op when its layout is known and it is one new tensor; else undefined.
at::Tensor allocate_binary_output(uint64_t layout, c10::DeviceIndex device);
// Whether calls of this layout are known to be queueable and to return their first argument (an in-place op).
bool returns_first_argument(uint64_t layout);

// "aten::mm(float32[4, 8], float32[8, 2])"
std::string describe_call(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments);

}  // namespace localneuron
