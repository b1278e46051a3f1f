// Stream order: when queued work and device memory agree that one thing comes before another. This is the one
// statement of the queue's ordering rule; queue/queue.cpp keeps rules 1 and 2, runtime/allocator.cpp rule 3.
//
// 1. A position on a stream is given out under the lock of the stream's queue, by the push that appends its work
//    (or adds it to the stream's pending Adaptive Eager run) before releasing that lock. A push that must wait
//    (for room in the queue, for the pending run to be handed over) waits before it takes a position. So positions
//    on a stream are appended in increasing order, and the queue's order is position order.
// 2. A stream's items run one at a time, in order: on the stream's worker or, for a sealed run at the head of an
//    empty queue, on the issuing thread that sealed it, while the worker waits. So a stream's `passed` position
//    (the last one whose work finished) means that the work of every position up to it has finished.
// 3. A device block is stamped with the position of each queued work that uses it when the work takes its
//    position. Memory stamped with position p is reusable only after p has passed (returned to the host, handed
//    to another stream, taken by a worker or by a host kernel running now), with one exception: an issuing
//    thread allocating on p's own stream may take it at once, since everything it does with the block is ordered
//    after p (queued behind p by rule 1, run in place only on an idle stream, or read after a synchronisation).
//
// Issuing threads share streams (several Python threads on the default stream): rule 1 is what keeps their
// pushes from overtaking one another.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>
#include <c10/util/ArrayRef.h>

#include <atomic>
#include <cstdint>

namespace localneuron {

// A point in a stream's queue: the work queued there at position `seq` of the queue `queue`.
struct StreamPosition {
  const void* queue = nullptr;  // nullptr: no queued work
  uint64_t seq = 0;
};

using WeakStorage = c10::weak_intrusive_ptr<c10::StorageImpl>;

// Kept by the queue (queue/queue.cpp):
// Whether the work at `position` has run.
bool position_passed(const StreamPosition& position);
// Whether a block used at `position` may be handed to an allocation made now by this thread on the current stream
// of `device`, in stream order (rule 3): `position` has passed, or it is on that stream and this thread issues work
// ordered after it (not a worker).
bool reusable_now(const StreamPosition& position, c10::DeviceIndex device);
// The position of the last work queued on `stream` (record_stream: the block is in use up to there).
StreamPosition stream_tail(const c10::Stream& stream);
// Whether no stream of any device has work queued or held back.
bool queues_idle();

}  // namespace localneuron
