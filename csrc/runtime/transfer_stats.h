// Bytes moved between host and device memory, for the portability report and the cost model.
#pragma once
#include <cstdint>

namespace localneuron {

struct TransferCounters {
  int64_t host_to_device_bytes, device_to_host_bytes, device_to_device_bytes, copies;
};
TransferCounters transfer_counters();
void reset_transfer_counters();
void count_transfer(bool from_device, bool to_device, int64_t bytes);

}  // namespace localneuron
