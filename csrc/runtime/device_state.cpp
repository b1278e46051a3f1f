#include "runtime/device_state.h"

#include <c10/util/Exception.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <limits>

namespace localneuron {
namespace {
std::atomic<int> g_count{0};
std::atomic<int64_t> g_capacity{24LL << 30};
std::string g_target = "trn2";
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};
thread_local c10::DeviceIndex t_current = 0;
thread_local std::array<c10::StreamId, kMaxDevices> t_current_streams{};  // every device's default stream, 0
}  // namespace

void configure_devices(int count, int64_t hbm_bytes_per_core, const std::string& target) {
  TORCH_CHECK(count >= 0 && count <= kMaxDevices, "localneuron supports 0 to ", kMaxDevices,
              " NeuronCores per process, got ", count);
  TORCH_CHECK(hbm_bytes_per_core > 0 && hbm_bytes_per_core <= kMaxCapacity, "the HBM per NeuronCore must be 1 to ",
              kMaxCapacity, " bytes, got ", hbm_bytes_per_core);
  g_count = count;
  g_capacity = hbm_bytes_per_core;
  g_target = target;
}

int device_count() { return g_count.load(); }

c10::DeviceIndex device_count_for_pytorch() {
  return static_cast<c10::DeviceIndex>(std::min(device_count(), int(std::numeric_limits<c10::DeviceIndex>::max())));
}
int64_t device_capacity() { return g_capacity.load(); }
const std::string& target_name() { return g_target; }

c10::DeviceIndex current_device() { return t_current; }
c10::StreamId current_stream_id(c10::DeviceIndex device) { return t_current_streams.at(device); }
void set_current_stream_id(c10::DeviceIndex device, c10::StreamId id) { t_current_streams.at(device) = id; }

c10::DeviceIndex checked_index(int64_t index) {
  if (index == -1) return t_current;
  const auto n = device_count();
  if (index < 0 || index >= n) {
    if (n == 0) {
      TORCH_CHECK(false, "Device index ", index, " is out of range: no Neuron devices are visible (check NEURON_RT_VISIBLE_CORES).");
    }
    // RuntimeError, in TorchNeuron's words (CUDA's invalid device ordinal is a RuntimeError too)
    TORCH_CHECK(false, "Device index ", index, " is out of range. Valid range is 0 to ", n - 1,
                " for this process (LOCALNEURON_CHIPS and NEURON_RT_VISIBLE_CORES set how many cores it sees).");
  }
  return static_cast<c10::DeviceIndex>(index);
}

void set_current_device(c10::DeviceIndex index) { t_current = checked_index(index); }

bool runtime_initialized() { return g_initialized.load(); }
void mark_forked_child() { g_bad_fork = g_initialized.load(); }

void check_not_forked_child() {
  TORCH_CHECK(!g_bad_fork.load(std::memory_order_relaxed),
              "Cannot re-initialize Neuron runtime in forked subprocess. To use Neuron with multiprocessing, "
              "use the 'spawn' start method");
}

void mark_runtime_initialized() {
  if (!g_initialized.load(std::memory_order_relaxed)) g_initialized = true;
}

}  // namespace localneuron
