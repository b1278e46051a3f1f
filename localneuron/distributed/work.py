"""NeuronWork: the async handle a `neuron` collective returns (docs/support-matrix.md#distributed, NeuronWork).

The bytes move on Gloo, through host aliases of the device tensors, and an alias does not own its
memory. So a NeuronWork
- keeps the device tensors alive until Gloo is done with them, even if the caller drops the handle
  (`dist.isend(t, dst)` without a wait is common);
- hands out a future whose value holds the `neuron` tensors, not CPU aliases of them (DDP and comm
  hooks read it);
- records the time from issue until the process saw the collective complete (and, while a
  torch.profiler trace records, the moment: work issued after it may read the result);
- names the group, rank and collective in the error when the transport fails.

Most Gloo works carry a future and can be waited on by any number of threads: wait() waits on them
directly, and nothing of ours runs on Gloo's threads unless someone asks for the future (a Python
callback there would cost a GIL hand-off per collective). Gloo's send, recv and reduce-scatter works
have no future and may be waited on only once: a daemon thread does that single wait for them.
"""
import threading
import time
from collections import deque
from datetime import timedelta

import torch
import torch.distributed as dist

from localneuron.distributed import stats
from localneuron.distributed.eager import eager_methods
from localneuron.runtime import trace_events


@eager_methods()
class NeuronWork(dist.Work):
    def __init__(self, kind: str, works: list, outputs: list, keep_alive: tuple, where: str,
                 timed: bool = True, traced=None):
        super().__init__()
        self._traced = traced  # trace_events.PythonWork of this collective, while a trace records
        self._kind = kind
        self._works = works
        self._outputs = outputs
        self._where = where
        self._started = time.perf_counter()
        self._timed = timed
        self._seen_complete = False
        self._gloo_futures = _futures(works)
        if self._gloo_futures is None:
            self._future = torch.futures.Future()
            self._done = threading.Event()  # a Future cannot be waited on with a timeout
            threading.Thread(target=self._wait_once, args=(keep_alive,), daemon=True, name=f"neuron-{kind}").start()
        else:
            self._future = None  # made on demand from the Gloo futures
            _in_flight.add(works, keep_alive)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        if self._gloo_futures is None:
            if not self._done.wait(timeout.total_seconds() or None):
                raise dist.DistBackendError(f"{self._where}: {self._kind} did not complete within {timeout}")
            self._future.wait()  # raises the failure, if any
            return True
        try:
            for work in self._works:
                work.wait(timeout)
        except dist.DistBackendError:
            raise
        except RuntimeError as error:
            raise explain(self._where, self._kind, error) from error
        self._saw_completion()
        return True

    def get_future(self) -> torch.futures.Future:
        if self._future is None:
            futures = self._gloo_futures
            done = futures[0] if len(futures) == 1 else torch.futures.collect_all(futures)
            self._future = done.then(self._device_result)
        return self._future

    def is_completed(self) -> bool:
        if self._gloo_futures is None:
            return self._done.is_set()
        return all(work.is_completed() for work in self._works)

    def is_success(self) -> bool:
        return self.is_completed() and self.exception() is None

    def exception(self):
        if self._gloo_futures is None:
            return self._future.exception() if self._done.is_set() else None
        return next((w.exception() for w in self._works if w.is_completed() and w.exception() is not None), None)

    def source_rank(self) -> int:
        return self._works[0].source_rank()

    def result(self) -> list:
        self.wait()
        return self._outputs

    def synchronize(self) -> None:
        """Device work is issued in order and completes before the collective reads it: nothing to do."""

    def block_current_stream(self) -> None:
        self.wait()

    def _device_result(self, _) -> list:
        """Then-callback of the Gloo future(s): the outcome, with device tensors as the value."""
        error = _first_failure(f.wait for f in self._gloo_futures)
        self._saw_completion()
        if error is not None:
            raise explain(self._where, self._kind, error)
        return self._outputs

    def _wait_once(self, keep_alive: tuple) -> None:
        """Background thread for works without a future: the only wait they get. Holding `keep_alive`
        keeps the device tensors alive until Gloo is done with them."""
        error = _first_failure(work.wait for work in self._works)
        self._saw_completion()
        if error is None:
            self._future.set_result(self._outputs)
        else:
            self._future.set_exception(explain(self._where, self._kind, error))
        self._done.set()

    def _saw_completion(self) -> None:
        with _seen_lock:  # the caller's wait and a future callback may both see the completion
            if self._seen_complete:
                return
            self._seen_complete = True
        if self._traced is not None:
            trace_events.seen(self._traced)
        if self._timed:
            stats.record_time(self._kind, time.perf_counter() - self._started)


class _InFlight:
    """Device tensors of collectives that may still be running, released in issue order once their Gloo
    works are complete; checked whenever a collective is issued. (The Gloo works themselves hold only
    host aliases, which do not own the bytes.)"""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: deque = deque()

    def add(self, works: list, keep_alive: tuple) -> None:
        with self._lock:
            while self._entries and all(w.is_completed() for w in self._entries[0][0]):
                self._entries.popleft()
            self._entries.append((works, keep_alive))


_in_flight = _InFlight()
_seen_lock = threading.Lock()


def explain(where: str, kind: str, error: Exception) -> dist.DistBackendError:
    """The transport's error, prefixed with the group, the rank and the collective that failed."""
    explained = dist.DistBackendError(f"{where}: {kind} failed: {error}")
    explained.__cause__ = error
    return explained


def _futures(works: list):
    try:
        return [work.get_future() for work in works]
    except RuntimeError:  # "Work::getFuture not implemented"
        return None


def _first_failure(waits) -> Exception | None:
    for wait in waits:
        try:
            wait()
        except Exception as error:  # noqa: BLE001 - returned to be reported
            return error
    return None
