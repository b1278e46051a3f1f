"""Device memory over time for `localneuron run --html`: a background thread reads the allocator's
counters of every device a few times per second (each read is a lock and a copy of a few integers)."""
import threading
import time

from localneuron import _C

INTERVAL_S = 0.05


class MemorySampler:
    def __init__(self, device: int = 0):
        self.device = device
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="localneuron-memory-sampler", daemon=True)

    def _sample(self) -> None:
        c = _C.memory_counters(self.device)
        self.samples.append({"t": time.monotonic(), "allocated": c["allocated_current"],
                             "reserved": c["reserved_current"]})

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self._sample()

    def __enter__(self):
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()
