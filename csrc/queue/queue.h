// The device queues: asynchronous execution. Each (NeuronCore, stream) has a FIFO of work drained by
// its own worker thread; the thread that issues an op enqueues it and continues. An error inside
// queued work is held and raised at the device's next synchronisation points, naming the op, its
// input signature and the Python line that enqueued it (held_errors.h: which threads, how often).
//
// Memory is stream-ordered, as with a caching allocator on a device: queued work holds no device
// storage alive (only weak references, see QueuedWork::held). When it is queued, the blocks it uses are
// stamped with its position in the stream (note_stream_use); a block freed in Python returns to the
// allocator at once, and the allocator hands it to the next allocation on a stream whose later work
// is ordered after every stamp (the same stream, or a stream whose stamped work has passed). So peak
// memory is what it would be with ops run when issued, and a block another stream still reads waits.
// The ordering rule this rests on, with several issuing threads per stream, is runtime/stream_order.h's.
//
// Queued is the default, as on TorchNeuron; NEURON_LAUNCH_BLOCKING=1 (set_launch_blocking) runs everything
// when it is issued, as a debugger wants.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/SmallVector.h>

#include "runtime/alias.h"
#include "runtime/source_line.h"
#include "runtime/stream_order.h"
#include "executor/executable_cache.h"
#include "queue/issuer_state.h"
#include "profiler/trace_plugin.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace localneuron {

// An argument of a fusible call: a tensor the run reads from memory (a device tensor, as queued), or a
// value the fused code bakes in (a plain value, a Python number's host tensor, None).
struct FusibleArgument {
  std::optional<TensorSnapshot> tensor;
  c10::IValue value;  // when there is no tensor
};

// What Adaptive Eager (fusion.h) needs of a queued op: the op, its arguments in schema order, the new
// tensors it fills, and the device storages of those outputs (their strong count tells whether anybody
// still refers to them).
struct FusibleCall {
  const c10::OperatorHandle* op = nullptr;
  c10::SmallVector<FusibleArgument, 3> arguments;
  c10::SmallVector<TensorSnapshot, 1> outputs;
  c10::SmallVector<const c10::StorageImpl*, 1> output_storages;  // one per output, kept valid by the work's `held`
};

struct QueuedWork {
  virtual ~QueuedWork() = default;
  virtual void run() = 0;
  // The op and its input signature, for error messages ("aten::mm(float32[4, 8], float32[8, 2])").
  virtual std::string describe() const = 0;
  // Adaptive Eager: whether this work may join a fused run, and its call when it does (valid while the work lives).
  virtual bool fusible() const { return false; }
  virtual const FusibleCall* fusible_call() const { return nullptr; }
  // Weak references to every device storage the work reads or writes: they do not keep the bytes
  // alive (a tensor freed in Python returns to the allocator at once), only the storage objects, so that
  // the work's blocks can be stamped when it is queued and fusion can tell dead outputs.
  void hold(const c10::Storage& storage) { held.emplace_back(storage.getWeakStorageImpl()); }
  c10::SmallVector<WeakStorage, 3> held;  // a binary op's two inputs and output without a heap allocation
  SourceLine source;    // the user's line that issued it (held_errors.h)
  uint64_t thread = 0;  // the thread that issued it (current_thread_id()), set when it is queued
  Launch launch;        // recorded for the trace once the work has run
  IssuerState issuer;   // taken when the work is queued; the worker runs it under this state
  uint64_t seq = 0;     // its position in its stream's queue (a fused run: its last op's)
  Executable* executable = nullptr;  // whose host time its runs sample (HostTimer), if it runs one
};

void set_launch_blocking(bool blocking);
// True when ops must run when issued: NEURON_LAUNCH_BLOCKING=1, a worker thread, a forked child,
// or interpreter exit.
bool runs_inline();
// True on a queue's worker thread: what runs there is queued work, part of some op already issued.
bool on_queue_worker();

// Appends work to the current stream's queue of `device`.
void enqueue(c10::DeviceIndex device, std::unique_ptr<QueuedWork> work);

// Work whose host kernel takes at most this long (measured: Executable::host_ns) runs on the issuing
// thread when its stream has nothing queued or held back: handing it over costs the issuing thread about
// as much (building the queue entry, waking the worker), and with nothing ahead of it running it now keeps
// stream order. Longer work goes to the worker, where it overlaps with Python. Before its first
// measurement, work counts by the bytes it touches. Measured with benchmarks/eager_overhead.py
// --run-in-place-max-ns (2 cores, load ~1): with 0, 5 µs or every op handed over, the HF Llama steps ran
// at 0.96-0.98x eager CPU (geomean) and the small steps at 0.91-1.16x; at 100 µs, 1.05x, because a
// greedy decode step's work then stayed on the issuing thread (generate 1.18x against 1.06x). The worker
// needs a core of its own: on one core, or a machine busy with other work, blocking mode is as fast.
constexpr int64_t kRunInPlaceMaxNs = 2'000;
constexpr int64_t kRunInPlaceMaxBytes = 256 * 1024;
// Queued-op semantics either way: runs `work` in place (see kRunInPlaceMaxNs) or enqueues it; an
// error is held for the device's next synchronisation point, naming the issuing line.
void run_or_enqueue(c10::DeviceIndex device, std::unique_ptr<QueuedWork> work, int64_t bytes);
// Whether work of `exe` (or nullptr) touching `bytes`, issued now on the current stream of `device`, runs in place.
bool runs_in_place(c10::DeviceIndex device, int64_t bytes, const Executable* exe);
// Holds the error of work that ran in place as a queued one's; `description` is its op and signature,
// the issuing line is taken here (the caller is the issuing thread).
void hold_in_place_error(c10::DeviceIndex device, std::string description, const std::exception& e);
// Overrides kRunInPlaceMaxBytes and kRunInPlaceMaxNs (-1: back to them); for benchmarks comparing policies.
void set_run_in_place_limits(int64_t max_bytes, int64_t max_ns);

// Waits until the queues are empty, then raises the held failures this thread was not told of (held_errors.h).
void synchronize_device(c10::DeviceIndex device);
void synchronize_all_devices();
void synchronize_stream(const c10::Stream& stream);
bool stream_idle(const c10::Stream& stream);
// Waits for the device's queued work without raising its errors (allocator retries, shutdown).
void drain_device(c10::DeviceIndex device);
void drain_all_devices();
// Waits for every queue, stops the workers; later ops run inline. At interpreter exit.
void shutdown_queues();
// In a forked child: the parent's workers do not exist here.
void forget_queues_after_fork();

// A busy period of `seconds` on the current stream of `device` (torch.neuron._sleep).
void enqueue_busy_period(c10::DeviceIndex device, double seconds);

// Events on queues: recorded when the stream reaches them, waited for by a later point of a stream.
struct QueueEvent;
std::shared_ptr<QueueEvent> new_queue_event();
void record_event(const std::shared_ptr<QueueEvent>& event, const c10::Stream& stream);
void block_stream_on_event(const std::shared_ptr<QueueEvent>& event, const c10::Stream& stream);
bool event_completed(const QueueEvent& event);
void synchronize_event(const QueueEvent& event);
// Milliseconds between the times two events completed.
double event_elapsed_ms(const QueueEvent& start, const QueueEvent& end);

}  // namespace localneuron
