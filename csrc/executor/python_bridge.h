// Calls from the executor into its Python policy (executor_contract.h), with boxed ATen arguments
// converted to the Python values the op's Python API takes.
#pragma once
#include "executor/executor_contract.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <string>

namespace localneuron {

// Installs the policy's callbacks; a second installation is an error (the executor keeps no
// replaceable hooks, so what runs is what registration installed).
void install_callbacks(ExecutorCallbacks callbacks);

// on_miss for the op's arguments stack[begin:].
RouteDecision decide_route(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin);
// run_python: replaces the arguments stack[begin:] by the results.
void run_python_route(int64_t executable_id, const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin);
// on_device_failure: replaces the arguments stack[begin:] by the results, or raises.
void recover_device_failure(int64_t executable_id, const c10::OperatorHandle& op, torch::jit::Stack* stack,
                            size_t begin, const char* message);

// on_kernel_refusal: returns when the call is to run as a CPU fallback, else raises the policy's error.
void report_kernel_refusal(const char* op_name, const std::string& reason);
// on_strided_write: returns when the call is to run, else raises the policy's error.
void report_strided_write(const c10::FunctionSchema& schema);

}  // namespace localneuron
