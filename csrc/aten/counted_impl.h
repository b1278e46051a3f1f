// Registers a device kernel whose calls TorchNeuron's trackers list as executed ops, naming its counter with the
// "name.overload" it registers: the name the tracker reports is written once, at the registration.
#pragma once
#include "executor/executor.h"

#include <torch/library.h>

#include <utility>

namespace localneuron {

template <class Kernel>
void counted_impl(torch::Library& m, CountedKernel kernel, const char* name, Kernel&& fn) {
  name_counted_kernel(kernel, name);
  m.impl(name, std::forward<Kernel>(fn));
}

}  // namespace localneuron
