"""The state of one kernel instance while it runs: target, memory, timeline, engine registers."""
import itertools
import threading
from contextlib import contextmanager

import numpy as np

from . import buffers
from .cycle_model import KernelReport, Timeline
from .errors import NkiUsageError
from .memory import OnChipMemory
from .tensor import NkiTensor, Storage

_active = threading.local()


def current_run():
    run = getattr(_active, "run", None)
    if run is None:
        raise NkiUsageError("NKI language and ISA calls only work inside a kernel; decorate the "
                            "function with @nki.jit and call it (or use nki.simulate)")
    return run


class KernelRun:
    def __init__(self, kernel_name, target, numerics, precise, grid=(1,), instance=0, keep_trace=False,
                 shared_allocations=None):
        self.kernel_name = kernel_name
        self.target = target
        self.numerics = numerics
        self.precise = precise
        self.grid = tuple(grid)                                   # launch grid (LNC degree or SPMD shape)
        self.coordinates = tuple(int(c) for c in np.unravel_index(instance, self.grid))
        self.memory = OnChipMemory(target)
        self.timeline = Timeline(target, keep_trace)
        # ScalarE reduce_regs and the Vector exponential accumulators: one per partition lane.
        self.scalar_accumulators = np.zeros(target.partitions, dtype=np.float32)
        self.random = np.random.default_rng(0)   # nl.random_seed reseeds it
        self._names = itertools.count()
        # Instances of one launch (LNC cores, SPMD programs) see the same shared_hbm tensors:
        # the n-th shared allocation of every instance is the same storage.
        self.shared_allocations = [] if shared_allocations is None else shared_allocations
        self._shared_index = 0
        self.lnc_group = None      # the LncGroup of a kernel[2] launch (set by it)
        self.registers = []        # nisa.register_alloc

    @contextmanager
    def active(self):
        previous = getattr(_active, "run", None)
        _active.run = self
        try:
            yield self
        finally:
            _active.run = previous

    def allocate(self, shape, dtype, buffer, name=""):
        if isinstance(buffer, str):
            raise NkiUsageError(f"buffer must be nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm, not the string {buffer!r}")
        if not isinstance(buffer, buffers.Buffer):
            raise NkiUsageError(f"buffer must be nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm, not {buffer!r}")
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        name = name or f"{buffer.name}_{next(self._names)}"
        if buffer is buffers.shared_hbm:
            return NkiTensor(self._shared(shape, dtype, name))
        storage = Storage.poisoned(shape, dtype, buffer, name, with_data=self.numerics)
        if buffer.on_chip:
            self.memory.allocate(storage)
        return NkiTensor(storage)

    def _shared(self, shape, dtype, name):
        index, self._shared_index = self._shared_index, self._shared_index + 1
        if index < len(self.shared_allocations):
            storage = self.shared_allocations[index]
            if storage.shape == shape and storage.dtype is dtype:
                storage.reads.clear()
                storage.writes.clear()
                return storage
        storage = Storage.poisoned(shape, dtype, buffers.shared_hbm, name, with_data=self.numerics)
        self.shared_allocations.append(storage)
        return storage

    def report(self, trace=False):
        t = self.timeline
        return KernelReport(
            kernel=self.kernel_name, target=self.target.name, latency_ns=t.finish,
            engine_busy_ns=t.engine_busy_ns(), instruction_counts=dict(t.counts),
            sbuf_peak_bytes=self.memory.peak["sbuf"], psum_peak_bytes=self.memory.peak["psum"],
            numerics=self.numerics, trace=t.trace if trace else None)
