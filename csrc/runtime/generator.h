// Per-device default generators: a Philox seed and offset each, as TorchNeuron keeps them (a 16-byte state).
// No op draws from them: random ops on neuron draw from the CPU's default generator (localneuron/device/random.py
// states the rule), so they hold what torch.neuron.manual_seed, seed, initial_seed and get/set_rng_state report.
#pragma once
#include <ATen/core/Generator.h>

namespace localneuron {

const at::Generator& default_generator(c10::DeviceIndex index);
// torch.Generator(device="neuron"): not available, as on TorchNeuron; raises saying what to use instead.
at::Generator new_generator(c10::DeviceIndex index);

}  // namespace localneuron
