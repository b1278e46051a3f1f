// Zero-copy bridges between device tensors and host tensors over the same bytes: host kernels run
// on CPU aliases of device tensors, and their results become device tensors without a copy.
#pragma once
#include <ATen/core/Tensor.h>

namespace localneuron {

class StreamUses;

// A CPU tensor over exactly the bytes and geometry of device tensor `t`; `t` must outlive it.
at::Tensor cpu_alias(const at::Tensor& t);
// A device tensor that takes over the storage of host result `host` (counted against capacity).
at::Tensor adopt(const at::Tensor& host, c10::DeviceIndex device);
// A device view of `base`'s storage with the geometry of `host_view`, a view of cpu_alias(base).
at::Tensor view_like(const at::Tensor& base, const at::Tensor& host_view);
// After a host kernel ran on `alias` of `device_tensor`: carry over resizes and new metadata.
void sync_back(const at::Tensor& device_tensor, const at::Tensor& alias);

}  // namespace localneuron

namespace localneuron {
// The stamps of adopted bytes (adopt()), or nullptr when `ptr` does not hold adopted bytes.
StreamUses* adopted_stream_uses(const c10::DataPtr& ptr);
// Adopted bytes freed while queued work still used them go back to the host once that work has run.
void release_passed_adopted_bytes();
}  // namespace localneuron
