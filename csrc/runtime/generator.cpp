#include "runtime/generator.h"

#include "runtime/device_state.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/CallOnce.h>

#include <array>
#include <cstring>

namespace localneuron {
namespace {

// The state's layout: the seed, then the offset, each a native-endian uint64 (CUDA's Philox layout, which
// DTensor's random-offset tracker reads from any device's get_rng_state).
constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

struct NeuronGeneratorImpl final : c10::GeneratorImpl {
  NeuronGeneratorImpl(c10::DeviceIndex index, uint64_t seed)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        seed_(seed) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    const uint64_t fresh = c10::detail::getNonDeterministicRandom();
    set_current_seed(fresh);
    return fresh;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == kStateBytes,
                "a neuron RNG state is a torch.uint8 tensor of ", kStateBytes, " bytes (the Philox seed, then the "
                "offset) as torch.neuron.get_rng_state() returns; got ", state.numel(), " elements of ",
                state.dtype().name());
    const auto* bytes = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, bytes, sizeof(seed_));
    std::memcpy(&offset_, bytes + sizeof(seed_), sizeof(offset_));
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::kByte);
    auto* bytes = state.data_ptr<uint8_t>();
    std::memcpy(bytes, &seed_, sizeof(seed_));
    std::memcpy(bytes + sizeof(seed_), &offset_, sizeof(offset_));
    return state.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return kNeuron; }

 private:
  NeuronGeneratorImpl* clone_impl() const override {
    auto* copy = new NeuronGeneratorImpl(device().index(), seed_);
    copy->offset_ = offset_;
    return copy;
  }

  uint64_t seed_;
  uint64_t offset_ = 0;
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::array<at::Generator, kMaxDevices> generators;
  static std::array<c10::once_flag, kMaxDevices> created;
  index = checked_index(index);
  c10::call_once(created[index], [index] {
    generators[index] = at::make_generator<NeuronGeneratorImpl>(index, c10::detail::getNonDeterministicRandom());
  });
  return generators[index];
}

at::Generator new_generator(c10::DeviceIndex) {
  TORCH_CHECK(false, "torch.Generator(device=\"neuron\") is not available: the neuron device has no random-number "
              "generator of its own (as on TorchNeuron), and random ops on neuron draw from the CPU's. Pass a CPU "
              "generator (torch.Generator().manual_seed(s)) to the op, or seed with torch.manual_seed(s).");
}

}  // namespace localneuron
