// Which simulated NeuronCores exist and which one the calling thread uses.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <cstdint>
#include <string>

namespace localneuron {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
// A trn2.48xlarge at LNC=1: 16 chips of 8 logical cores; also PyTorch's ceiling (a DeviceIndex is 8 bits).
constexpr int kMaxDevices = 128;
// Caps the HBM per core so that every byte count of the allocator stays far inside int64.
constexpr int64_t kMaxCapacity = int64_t(1) << 62;

// Set once from Python (runtime/target.py) before the first device use.
void configure_devices(int count, int64_t hbm_bytes_per_core, const std::string& target);
// How many devices this process sees, 0 to kMaxDevices.
int device_count();
// The same for PyTorch's interfaces (the guard's and the hooks' deviceCount), whose 8-bit DeviceIndex cannot say
// 128: the full instance at LNC=1 shows 127 there, while torch.neuron.device_count() and every index check see 128.
c10::DeviceIndex device_count_for_pytorch();
int64_t device_capacity();
const std::string& target_name();

c10::DeviceIndex current_device();
// The calling thread's current stream on `device` (one id space for all devices, each stream made on one device; 0 is
// each device's default). Each device has its own, as each CUDA device has: setting a stream on one device leaves
// the others' as they were.
c10::StreamId current_stream_id(c10::DeviceIndex device);
void set_current_stream_id(c10::DeviceIndex device, c10::StreamId id);
void set_current_device(c10::DeviceIndex index);
// Resolves -1 ("the current device") and checks the range with the runtime's wording. Takes a wide
// integer so that an index from Python is checked before it is narrowed to a DeviceIndex.
c10::DeviceIndex checked_index(int64_t index);

bool runtime_initialized();
void mark_runtime_initialized();
// A child forked from a process whose runtime was initialized cannot use the device.
void mark_forked_child();
void check_not_forked_child();

}  // namespace localneuron
