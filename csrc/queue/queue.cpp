#include "queue/queue.h"

#include "runtime/allocator.h"
#include "runtime/device_state.h"
#include "fusion/fusion.h"
#include "queue/held_errors.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace localneuron {
namespace {

// Python may run this far ahead of a worker; beyond it the issuing thread waits.
constexpr uint64_t kMaxQueued = 128;
constexpr uint64_t kNobodyWaits = ~0ULL;

// Signals sent to the process (Ctrl-C's SIGINT, SIGTERM, a timer's SIGALRM) go to one of its threads that does not
// block them, and Python runs their handlers on its main thread only: one that reached a worker would leave the
// main thread asleep in time.sleep() or a blocking read until that ended by itself (a Ctrl-C answered minutes
// late). So a worker starts with them blocked, and the kernel gives them to a Python thread. Faults (SIGSEGV,
// SIGBUS, SIGFPE) belong to the faulting thread and stay unblocked.
std::thread start_without_process_signals(std::function<void()> body) {
  sigset_t process_signals, previous;
  sigemptyset(&process_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGVTALRM, SIGPROF, SIGUSR1, SIGUSR2, SIGCHLD, SIGWINCH}) {
    sigaddset(&process_signals, s);
  }
  pthread_sigmask(SIG_BLOCK, &process_signals, &previous);  // the new thread inherits this mask from its first step
  std::thread thread(std::move(body));
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return thread;
}

std::atomic<bool> g_blocking{false};
std::atomic<bool> g_stopped{false};
thread_local bool t_is_worker = false;

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Waits on `cv` without holding the GIL: queued work may need it to free a tensor's Python object.
template <typename Predicate>
void wait_releasing_gil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Predicate done) {
  if (done()) return;
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) {
    lock.unlock();
    saved = PyEval_SaveThread();
    lock.lock();
  }
  cv.wait(lock, done);
  if (saved != nullptr) {
    lock.unlock();
    PyEval_RestoreThread(saved);
    lock.lock();
  }
}

void hold_error(c10::DeviceIndex device, const QueuedWork& work, const std::exception& e) {
  hold_failure(device, work.describe(), work.source, work.thread, e);
}

std::atomic<int64_t> g_run_in_place_max_bytes{kRunInPlaceMaxBytes}, g_run_in_place_max_ns{kRunInPlaceMaxNs};

// Runs queued work on the issuing thread, with a worker's semantics: its error is held, not raised.
void run_here(c10::DeviceIndex device, QueuedWork& work) {
  try {
    const HostTimer timer(work.executable);
    work.run();
  } catch (const std::exception& e) {
    if (work.source.code == nullptr) {  // work run in place: this is the thread that issued it
      work.source = capture_source_line();
      work.thread = current_thread_id();
    }
    hold_error(device, work, e);
  }
  if (work.launch.on) record_launch(work.launch);
}

// One stream's queue and its worker. Keeps the ordering rule of stream_order.h: a position is given out only
// under `mu`, by the push that appends its work (or adds it to the pending run) before releasing `mu`; room is
// made, and the pending run handed over, before the position is given out. Items run one at a time in order,
// on the worker, or on an issuing thread for a sealed run at the head of an empty queue (the worker waits).
struct StreamQueue {
  c10::DeviceIndex device;
  c10::StreamId stream;
  std::mutex mu;
  std::condition_variable has_work, progressed;
  std::deque<std::unique_ptr<QueuedWork>> items;
  std::unique_ptr<FusedRun> pending;  // Adaptive Eager: fusible work held back to run fused; guarded by mu
  // Items appended (a run an issuing thread runs at the head included) and run; guarded by mu.
  uint64_t enqueued = 0, completed = 0;
  uint64_t issued = 0;  // the last position given out (a fused run's ops one by one); guarded by mu
  bool head_runs_here = false;  // an issuing thread runs the head item; the worker waits for it; guarded by mu
  // The smallest `completed` a waiting thread needs; the worker wakes waiters only then, not after every
  // item (each wake-up is a system call and two thread switches). Guarded by mu.
  uint64_t wake_at = kNobodyWaits;
  std::atomic<uint64_t> passed{0};  // the last position whose work has run: every earlier one has run too
  bool worker_waiting = false, stopping = false;
  std::atomic<bool> idle{true};
  std::thread worker;

  StreamQueue(c10::DeviceIndex d, c10::StreamId s) : device(d), stream(s) {
    worker = start_without_process_signals([this] { drain_forever(); });
  }

  void push(std::unique_ptr<QueuedWork> work) {
    work->issuer = IssuerState::capture();
    work->thread = current_thread_id();
    const bool joins = joins_run(*work);
    std::unique_lock<std::mutex> lock(mu);
    // Everything that may release the lock comes first: from the moment the work takes its position until it is
    // appended (or pending), the lock stays held.
    for (;;) {
      if (enqueued - completed >= kMaxQueued) {
        wait_completed(lock, enqueued - kMaxQueued + 1);
        continue;
      }
      if (pending && (!joins || !(pending->issuer == work->issuer))) {  // one issuer state per run
        hand_over_pending(lock);
        continue;
      }
      break;
    }
    work->seq = ++issued;
    note_stream_use(work->held, StreamPosition{this, work->seq});
    if (!joins) {
      append(std::move(work));
      return;
    }
    if (!pending) {
      pending = std::make_unique<FusedRun>(device);
      pending->issuer = work->issuer;
    }
    pending->seq = work->seq;
    pending->add(std::move(work));
    idle.store(false, std::memory_order_relaxed);
    if (pending->full()) hand_over_pending(lock);
  }

  // Hands the pending run over. With nothing in flight it runs here, on the issuing thread, as the stream's head
  // item: that thread holds the GIL the fused executable needs, which a worker would wait for (up to Python's
  // switch interval) while Python keeps issuing ops. Otherwise the worker runs it after the work ahead of it.
  // Releases the lock when it runs the run here.
  void hand_over_pending(std::unique_lock<std::mutex>& lock) {
    if (!pending) return;
    pending->seal();
    std::unique_ptr<QueuedWork> run = std::move(pending);
    if (enqueued != completed || t_is_worker) {
      append(std::move(run));
      return;
    }
    enqueued++;
    head_runs_here = true;
    lock.unlock();
    {
      const IssuerStateGuard issuer(run->issuer);  // the run's, which need not be the state of the thread ending it
      run_here(device, *run);
    }
    pass(run->seq);
    run.reset();
    lock.lock();
    head_runs_here = false;
    finished_one();
    if (worker_waiting && !items.empty()) has_work.notify_one();
  }

  void pass(uint64_t seq) { passed.store(seq, std::memory_order_release); }

  // Waits until `target` items have run.
  void wait_completed(std::unique_lock<std::mutex>& lock, uint64_t target) {
    wait_releasing_gil(lock, progressed, [&] {
      if (completed >= target) return true;
      wake_at = std::min(wake_at, target);
      return false;
    });
  }

  // Never waits: room was made before the work took its position. Guarded by mu.
  void append(std::unique_ptr<QueuedWork> work) {
    items.push_back(std::move(work));
    enqueued++;
    idle.store(false, std::memory_order_relaxed);
    if (worker_waiting && !head_runs_here) has_work.notify_one();
  }

  // An item has run: counts it, and wakes whoever waits for it. Guarded by mu.
  void finished_one() {
    completed++;
    if (completed == enqueued && !pending) idle.store(true, std::memory_order_release);
    if (completed >= wake_at) {
      wake_at = kNobodyWaits;
      progressed.notify_all();
    }
  }

  // Hands the pending run over: something waits for this stream.
  void flush(std::unique_lock<std::mutex>& lock) { hand_over_pending(lock); }

  void wait_empty() {
    if (idle.load(std::memory_order_acquire)) return;
    std::unique_lock<std::mutex> lock(mu);
    flush(lock);
    wait_completed(lock, enqueued);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
      has_work.notify_one();
    }
    if (worker.joinable()) worker.join();
  }

  // The head item, once no issuing thread runs one; nullptr when stopping with nothing left.
  std::unique_ptr<QueuedWork> next() {
    std::unique_lock<std::mutex> lock(mu);
    const auto ready = [&] { return items.empty() ? stopping : !head_runs_here; };
    if (!ready()) {
      // Python usually issues the next op within microseconds: yield for a moment before sleeping.
      for (int i = 0; i < 64 && !ready(); i++) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      }
      worker_waiting = true;
      has_work.wait(lock, ready);
      worker_waiting = false;
    }
    if (items.empty()) return nullptr;
    std::unique_ptr<QueuedWork> work = std::move(items.front());
    items.pop_front();
    return work;
  }

  void drain_forever() {
    t_is_worker = true;
    while (std::unique_ptr<QueuedWork> work = next()) {
      try {
        const IssuerStateGuard issuer(work->issuer);
        const HostTimer timer(work->executable);
        work->run();
      } catch (const std::exception& e) {
        hold_error(device, *work, e);
      }
      if (work->launch.on) record_launch(work->launch);
      pass(work->seq);  // blocks it used may go to other streams and back to the host from here on
      work.reset();
      std::lock_guard<std::mutex> lock(mu);
      finished_one();
    }
  }
};

// Queues live for the process (workers are joined at exit, the objects never destroyed).
std::mutex g_queues_mu;
std::vector<StreamQueue*> g_queues;
std::unordered_map<uint64_t, StreamQueue*> g_queue_index;
std::atomic<uint64_t> g_queue_generation{1};

uint64_t queue_key(c10::DeviceIndex d, c10::StreamId s) {
  return static_cast<uint64_t>(s) * kMaxDevices + static_cast<uint64_t>(d);
}

StreamQueue* find_queue(c10::DeviceIndex d, c10::StreamId s, bool create) {
  thread_local uint64_t cached_key = ~0ULL, cached_generation = 0;
  thread_local StreamQueue* cached = nullptr;
  const uint64_t key = queue_key(d, s);
  const uint64_t generation = g_queue_generation.load(std::memory_order_relaxed);
  if (key == cached_key && generation == cached_generation) return cached;
  std::lock_guard<std::mutex> lock(g_queues_mu);
  auto it = g_queue_index.find(key);
  StreamQueue* q = nullptr;
  if (it != g_queue_index.end()) {
    q = it->second;
  } else if (create) {
    q = new StreamQueue(d, s);
    g_queues.push_back(q);
    g_queue_index.emplace(key, q);
  }
  if (q != nullptr) {
    cached_key = key;
    cached_generation = generation;
    cached = q;
  }
  return q;
}

std::vector<StreamQueue*> queues_of(std::optional<c10::DeviceIndex> device) {
  std::lock_guard<std::mutex> lock(g_queues_mu);
  std::vector<StreamQueue*> out;
  for (StreamQueue* q : g_queues) {
    if (!device || q->device == *device) out.push_back(q);
  }
  return out;
}


}  // namespace

bool position_passed(const StreamPosition& position) {
  const auto* q = static_cast<const StreamQueue*>(position.queue);
  return q == nullptr || q->passed.load(std::memory_order_acquire) >= position.seq;
}

bool reusable_now(const StreamPosition& position, c10::DeviceIndex device) {
  if (position_passed(position)) return true;
  return !t_is_worker && position.queue == find_queue(device, current_stream_id(device), false);
}

StreamPosition stream_tail(const c10::Stream& stream) {
  StreamQueue* q = runs_inline() ? nullptr : find_queue(stream.device_index(), stream.id(), false);
  if (q == nullptr) return {};
  std::lock_guard<std::mutex> lock(q->mu);
  return {q, q->issued};
}

bool queues_idle() {
  for (StreamQueue* q : queues_of(std::nullopt)) {
    if (!q->idle.load(std::memory_order_acquire)) return false;
  }
  return true;
}

void set_launch_blocking(bool blocking) { g_blocking = blocking; }

bool runs_inline() {
  return g_blocking.load(std::memory_order_relaxed) || t_is_worker || g_stopped.load(std::memory_order_relaxed);
}

bool on_queue_worker() { return t_is_worker; }

void enqueue(c10::DeviceIndex device, std::unique_ptr<QueuedWork> work) {
  find_queue(device, current_stream_id(device), true)->push(std::move(work));
}

bool runs_in_place(c10::DeviceIndex device, int64_t bytes, const Executable* exe) {
  const int64_t ns = exe != nullptr ? exe->host_ns.load(std::memory_order_relaxed) : -1;
  if (ns >= 0 ? ns > g_run_in_place_max_ns.load(std::memory_order_relaxed)
              : bytes > g_run_in_place_max_bytes.load(std::memory_order_relaxed)) {
    return false;
  }
  const StreamQueue* q = find_queue(device, current_stream_id(device), false);
  return q == nullptr || q->idle.load(std::memory_order_acquire);
}

void hold_in_place_error(c10::DeviceIndex device, std::string description, const std::exception& e) {
  hold_failure(device, description, capture_source_line(), current_thread_id(), e);
}

void run_or_enqueue(c10::DeviceIndex device, std::unique_ptr<QueuedWork> work, int64_t bytes) {
  if (runs_in_place(device, bytes, work->executable) && !joins_run(*work)) {
    run_here(device, *work);
    return;
  }
  work->source = capture_source_line();
  enqueue(device, std::move(work));
}

void set_run_in_place_limits(int64_t max_bytes, int64_t max_ns) {
  g_run_in_place_max_bytes = max_bytes < 0 ? kRunInPlaceMaxBytes : max_bytes;
  g_run_in_place_max_ns = max_ns < 0 ? kRunInPlaceMaxNs : max_ns;
}

void drain_device(c10::DeviceIndex device) {
  if (t_is_worker) return;
  for (StreamQueue* q : queues_of(device)) q->wait_empty();
}

void drain_all_devices() {
  if (t_is_worker) return;
  for (StreamQueue* q : queues_of(std::nullopt)) q->wait_empty();
}

void synchronize_device(c10::DeviceIndex device) {
  device = checked_index(device);
  drain_device(device);
  raise_held_failures(device);
}

void synchronize_all_devices() {
  if (t_is_worker) return;
  drain_all_devices();
  for (int d = 0; d < device_count(); d++) raise_held_failures(static_cast<c10::DeviceIndex>(d));
}

void synchronize_stream(const c10::Stream& stream) {
  if (StreamQueue* q = find_queue(stream.device_index(), stream.id(), false)) q->wait_empty();
  raise_held_failures(stream.device_index());
}

bool stream_idle(const c10::Stream& stream) {
  StreamQueue* q = find_queue(stream.device_index(), stream.id(), false);
  if (q == nullptr || q->idle.load(std::memory_order_acquire)) return true;
  std::unique_lock<std::mutex> lock(q->mu);
  q->flush(lock);  // a caller polling query() must see the held-back run finish
  return false;
}

void shutdown_queues() {
  g_stopped = true;
  for (StreamQueue* q : queues_of(std::nullopt)) {
    q->wait_empty();
    q->stop();
  }
}

void forget_queues_after_fork() {
  // The parent's worker threads were not copied into this process; their queues are unusable.
  std::lock_guard<std::mutex> lock(g_queues_mu);
  g_queues.clear();
  g_queue_index.clear();
  g_queue_generation++;
  g_stopped = true;
  forget_held_failures_after_fork();
}

namespace {
struct BusyPeriod final : QueuedWork {
  double seconds;
  explicit BusyPeriod(double s) : seconds(s) {}
  void run() override { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }
  std::string describe() const override { return "busy period"; }
};
}  // namespace

void enqueue_busy_period(c10::DeviceIndex device, double seconds) {
  TORCH_CHECK(seconds >= 0 && seconds < 3600, "a busy period must last 0 to 3600 seconds, got ", seconds);
  auto work = std::make_unique<BusyPeriod>(seconds);
  if (runs_inline()) {
    work->run();
    return;
  }
  enqueue(checked_index(device), std::move(work));
}

// Events: a record is a marker in a stream's queue; it completes when the worker reaches it.
struct QueueEvent {
  std::mutex mu;
  std::condition_variable reached;
  uint64_t recorded = 0, completed = 0;  // guarded by mu
  c10::DeviceIndex device = -1;          // of the last record; guarded by mu
  double completed_at_ms = 0;
};

std::shared_ptr<QueueEvent> new_queue_event() { return std::make_shared<QueueEvent>(); }

namespace {

void complete(QueueEvent& e, uint64_t seq) {
  std::lock_guard<std::mutex> lock(e.mu);
  if (seq > e.completed) {
    e.completed = seq;
    e.completed_at_ms = now_ms();
  }
  e.reached.notify_all();
}

void wait_for(QueueEvent& e, uint64_t seq) {
  std::unique_lock<std::mutex> lock(e.mu);
  wait_releasing_gil(lock, e.reached, [&] { return e.completed >= seq; });
}

// A point of a stream's queue that completes the `record`-th record of an event, or waits for it.
struct EventPoint final : QueuedWork {
  enum Kind { Record, Wait } kind;
  std::shared_ptr<QueueEvent> event;
  uint64_t record;
  EventPoint(Kind k, std::shared_ptr<QueueEvent> e, uint64_t r) : kind(k), event(std::move(e)), record(r) {}
  void run() override {
    if (kind == Record) complete(*event, record);
    else wait_for(*event, record);
  }
  std::string describe() const override { return kind == Record ? "event record" : "event wait"; }
};

}  // namespace

void record_event(const std::shared_ptr<QueueEvent>& event, const c10::Stream& stream) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    seq = ++event->recorded;
    event->device = stream.device_index();
  }
  StreamQueue* q = runs_inline() ? nullptr : find_queue(stream.device_index(), stream.id(), false);
  if (q == nullptr || q->idle.load(std::memory_order_acquire)) {
    complete(*event, seq);
  } else {
    q->push(std::make_unique<EventPoint>(EventPoint::Record, event, seq));
  }
}

void block_stream_on_event(const std::shared_ptr<QueueEvent>& event, const c10::Stream& stream) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(event->mu);
    if (event->completed >= event->recorded) return;
    seq = event->recorded;
  }
  if (runs_inline()) {
    wait_for(*event, seq);
    return;
  }
  find_queue(stream.device_index(), stream.id(), true)->push(std::make_unique<EventPoint>(EventPoint::Wait, event, seq));
}

bool event_completed(const QueueEvent& event) {
  auto& e = const_cast<QueueEvent&>(event);
  std::lock_guard<std::mutex> lock(e.mu);
  return e.completed >= e.recorded;
}

void synchronize_event(const QueueEvent& event) {
  auto& e = const_cast<QueueEvent&>(event);
  uint64_t seq;
  c10::DeviceIndex device;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    seq = e.recorded;
    device = e.device;
  }
  wait_for(e, seq);
  if (device >= 0) raise_held_failures(device);
}

double event_elapsed_ms(const QueueEvent& start, const QueueEvent& end) {
  TORCH_CHECK(start.recorded > 0 && end.recorded > 0, "Both events must be recorded before calculating elapsed time.");
  synchronize_event(start);
  synchronize_event(end);
  return end.completed_at_ms - start.completed_at_ms;
}

}  // namespace localneuron
