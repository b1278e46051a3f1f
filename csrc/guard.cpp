// Device guard: current device, streams and events. The simulated core executes each op when it is
// issued, so every stream is always idle and events carry the host time at which they were recorded.
#include "device_state.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>

namespace localneuron {
namespace {

thread_local c10::StreamId t_current_stream = 0;
std::atomic<c10::StreamId> g_next_stream{1};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  NeuronGuardImpl() = default;
  explicit NeuronGuardImpl(c10::DeviceType) {}

  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::DeviceIndex old = current_device();
    if (d.index() >= 0) set_current_device(d.index());
    return {kNeuron, old};
  }
  c10::Device getDevice() const override { return {kNeuron, current_device()}; }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) set_current_device(d.index());
  }
  c10::Device resolve(c10::Device d) const { return {kNeuron, d.index() < 0 ? current_device() : d.index()}; }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::UNSAFE, resolve(d), t_current_stream);
  }
  // getStream must not throw; the streams created here name a device that must exist.
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, {kNeuron, checked_index(d.index())}, 0);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::UNSAFE, {kNeuron, checked_index(d.index())}, g_next_stream++);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getNewStream(d, 0); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const c10::Stream old(c10::Stream::UNSAFE, s.device(), t_current_stream);
    t_current_stream = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new double(0);
    *static_cast<double*>(*event) = now_ms();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<double*>(event); }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    return *static_cast<double*>(end) - *static_cast<double*>(start);
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace localneuron
