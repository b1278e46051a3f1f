"""NeuronWork: the async handle a `neuron` collective returns (contract §10.3, NeuronWork).

The bytes move on Gloo, through host aliases of the device tensors, and an alias does not own its
memory. So a NeuronWork
- keeps the device tensors alive until Gloo is done with them, even if the caller drops the handle
  (`dist.isend(t, dst)` without a wait is common);
- completes its own future with the device tensors, so `get_future().value()` (DDP reads it, and so
  do comm hooks) holds `neuron` tensors, not CPU aliases of them;
- records how long the collective took;
- names the group, rank and collective in the error when the transport fails.

Completion is observed through the Gloo work's future where Gloo has one. Gloo's send, recv and
reduce-scatter works have none; a daemon thread waits for those (the wait releases the GIL).
"""
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from localneuron.distributed import stats


class NeuronWork(dist.Work):
    def __init__(self, kind: str, works: list, outputs: list, keep_alive: tuple, where: str,
                 timed: bool = True):
        super().__init__()
        self._kind = kind
        self._works = works
        self._where = where
        self._future = future = torch.futures.Future()
        self._done = done = threading.Event()  # a Future cannot be waited on with a timeout
        started = time.perf_counter()

        # Runs once every inner work is done, with the first failure or None. It binds what it needs and
        # not `self`, so the device tensors live until then whatever happens to the handle.
        def complete(error, keep=keep_alive):
            if timed:
                stats.record_time(kind, time.perf_counter() - started)
            if error is None:
                future.set_result(outputs)
            else:
                future.set_exception(explain(where, kind, error))
            done.set()

        futures = _futures(works)
        if futures is None:
            threading.Thread(target=_wait_then, args=(works, complete), daemon=True, name=f"neuron-{kind}").start()
        else:
            # The callback runs inside Gloo's completion, before the Gloo work counts as finished: it must
            # read the outcome from the futures, never wait on the works.
            all_done = futures[0] if len(futures) == 1 else torch.futures.collect_all(futures)
            all_done.add_done_callback(lambda _: complete(_first_failure(f.wait for f in futures)))

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        # Only the completion path waits on the Gloo works: a Gloo send/recv can be waited on only once.
        if not self._done.wait(timeout.total_seconds() or None):
            raise dist.DistBackendError(f"{self._where}: {self._kind} did not complete within {timeout}")
        self._future.wait()  # raises the failure, if any
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        return all(work.is_success() for work in self._works)

    def exception(self):
        return next((work.exception() for work in self._works if work.exception() is not None), None)

    def source_rank(self) -> int:
        return self._works[0].source_rank()

    def result(self) -> list:
        self.wait()
        return self._future.value()

    def synchronize(self) -> None:
        """Device work is issued in order and completes before the collective reads it: nothing to do."""

    def block_current_stream(self) -> None:
        self.wait()


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


def _wait_then(works: list, complete) -> None:
    complete(_first_failure(work.wait for work in works))


def _first_failure(waits) -> Exception | None:
    for wait in waits:
        try:
            wait()
        except Exception as error:  # noqa: BLE001 - returned to be reported
            return error
    return None
