// Zero-copy bridges between device tensors and host tensors over the same bytes: host kernels run
// on CPU aliases of device tensors, and their results become device tensors without a copy.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

namespace localneuron {

class StreamUses;

// A tensor's bytes and geometry, without a TensorImpl: what queued work records of a device tensor when it
// is queued, so that a fused run can wire and run its ops on data pointers alone (building and freeing a
// host alias per operand was a third of the issuing thread's cost per fused op). cpu_alias() makes a host
// tensor of it where a host kernel or Python needs one. Lazy conj/neg bits are not recorded.
struct TensorSnapshot {
  void* block = nullptr;  // the storage's bytes (nullptr: none)
  size_t block_bytes = 0;
  int64_t offset = 0;  // storage offset, in elements
  at::ScalarType dtype = at::kFloat;
  c10::SmallVector<int64_t, 4> sizes, strides;

  // Raises, as cpu_alias does, when `t`'s storage no longer covers it.
  explicit TensorSnapshot(const at::Tensor& t);
  void* data() const { return static_cast<char*>(block) + offset * static_cast<int64_t>(c10::elementSize(dtype)); }
  // The same bytes seen the same way.
  bool operator==(const TensorSnapshot& o) const {
    return data() == o.data() && dtype == o.dtype && sizes == o.sizes && strides == o.strides;
  }
};
// Whether cpu_alias(TensorSnapshot(t)) would be cpu_alias(t): `t` has bytes and no lazy bits.
bool snapshot_is_exact(const at::Tensor& t);

// A CPU tensor over exactly the bytes and geometry of device tensor `t`; `t` must outlive it.
at::Tensor cpu_alias(const at::Tensor& t);
// A CPU tensor over the bytes and geometry `s` recorded; they must still be there.
at::Tensor cpu_alias(const TensorSnapshot& s);
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
