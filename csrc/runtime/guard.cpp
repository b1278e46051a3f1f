// Device guard: current device, streams and events, over the device queues (queue.h). The stream rule: guard.h.
#include "runtime/guard.h"
#include "runtime/device_state.h"
#include "queue/queue.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>

namespace localneuron {
namespace {

std::atomic<c10::StreamId> g_next_stream{1};
pybind11::object* g_new_streams_are_distinct = nullptr;  // process lifetime, like the executor's callbacks

bool new_streams_are_distinct() {
  if (g_new_streams_are_distinct == nullptr || !Py_IsInitialized()) return true;
  pybind11::gil_scoped_acquire gil;
  return (*g_new_streams_are_distinct)().cast<bool>();
}

// What torch.Event holds for a neuron event.
using EventHandle = std::shared_ptr<QueueEvent>;

const EventHandle& handle(void* event) { return *static_cast<EventHandle*>(event); }

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
    const c10::Device device = resolve(d);
    return c10::Stream(c10::Stream::UNSAFE, device, current_stream_id(device.index()));
  }
  // getStream must not throw; the streams created here name a device that must exist.
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, {kNeuron, checked_index(d.index())}, 0);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    const c10::Device device{kNeuron, checked_index(d.index())};
    return c10::Stream(c10::Stream::UNSAFE, device, new_streams_are_distinct() ? g_next_stream++ : 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getNewStream(d, 0); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    const c10::Stream old(c10::Stream::UNSAFE, s.device(), current_stream_id(s.device_index()));
    set_current_stream_id(s.device_index(), s.id());
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count_for_pytorch(); }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new EventHandle(new_queue_event());
    record_event(handle(*event), stream);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) block_stream_on_event(handle(event), stream);
  }
  bool queryEvent(void* event) const override { return event == nullptr || event_completed(*handle(event)); }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<EventHandle*>(event);
  }
  bool queryStream(const c10::Stream& stream) const override { return stream_idle(stream); }
  void synchronizeStream(const c10::Stream& stream) const override { synchronize_stream(stream); }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) synchronize_event(*handle(event));
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override { synchronize_device(device); }
  // Queued work holds every tensor it uses until it is done, so a block is never reused early.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    return event_elapsed_ms(*handle(start), *handle(end));
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

void set_new_stream_rule(pybind11::object new_streams_are_distinct) {
  if (!PyCallable_Check(new_streams_are_distinct.ptr()))
    throw pybind11::type_error("set_new_stream_rule: new_streams_are_distinct must be callable");
  if (g_new_streams_are_distinct == nullptr) g_new_streams_are_distinct = new pybind11::object();
  *g_new_streams_are_distinct = std::move(new_streams_are_distinct);
}

}  // namespace localneuron
