// Per-device random generators. Host kernels draw from a CPU "twin" owned by each neuron generator,
// so torch.neuron.manual_seed and torch.Generator(device="neuron") control what device ops draw.
#pragma once
#include <ATen/core/Generator.h>

namespace localneuron {

const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
// The CPU generator a host kernel must use in place of `neuron_generator`.
at::Generator host_twin(const at::Generator& neuron_generator);

}  // namespace localneuron
