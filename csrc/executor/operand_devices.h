// The devices an op's tensor operands may live on: one NeuronCore per op (CUDA's rule), and host
// tensors only as 0-dim scalars or, as on CUDA, as the indices of advanced indexing (device route).
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace localneuron {

// Checks the operands stack[begin:] of `op`; raises CUDA's "Expected all tensors to be on the same
// device" error when two NeuronCores are mixed, and with refuse_host TorchNeuron's error for a
// non-scalar host tensor.
void check_operand_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin,
                           bool refuse_host);

// (op, calls refused for mixing NeuronCores), for the portability report.
std::vector<std::pair<std::string, int64_t>> cross_device_errors();
void reset_cross_device_errors();

}  // namespace localneuron
