#include "runtime/generator.h"

#include "runtime/device_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/CallOnce.h>

#include <array>
#include <memory>

namespace localneuron {
namespace {

struct NeuronGeneratorImpl final : c10::GeneratorImpl {
  explicit NeuronGeneratorImpl(c10::DeviceIndex index, at::Generator twin)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        twin_(std::move(twin)) {}

  void set_current_seed(uint64_t seed) override { twin_.set_current_seed(seed); }
  void set_offset(uint64_t offset) override { twin_.set_offset(offset); }
  uint64_t get_offset() const override { return twin_.get_offset(); }
  uint64_t current_seed() const override { return twin_.current_seed(); }
  uint64_t seed() override { return twin_.seed(); }
  void set_state(const c10::TensorImpl& state) override { twin_.unsafeGetGeneratorImpl()->set_state(state); }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override { return twin_.unsafeGetGeneratorImpl()->get_state(); }
  static c10::DeviceType device_type() { return kNeuron; }

  at::Generator twin_;

 private:
  NeuronGeneratorImpl* clone_impl() const override {
    return new NeuronGeneratorImpl(device().index(), twin_.clone());
  }
};

at::Generator make(c10::DeviceIndex index, uint64_t seed) {
  return at::make_generator<NeuronGeneratorImpl>(index, at::make_generator<at::CPUGeneratorImpl>(seed));
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::array<at::Generator, kMaxDevices> generators;
  static std::array<c10::once_flag, kMaxDevices> created;
  index = checked_index(index);
  c10::call_once(created[index], [index] {
    generators[index] = make(index, c10::detail::getNonDeterministicRandom());
  });
  return generators[index];
}

at::Generator new_generator(c10::DeviceIndex index) {
  return make(checked_index(index), c10::default_rng_seed_val);
}

at::Generator host_twin(const at::Generator& neuron_generator) {
  return static_cast<NeuronGeneratorImpl*>(neuron_generator.unsafeGetGeneratorImpl())->twin_;
}

}  // namespace localneuron
