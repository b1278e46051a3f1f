"""Schedules instructions onto engine streams, honouring data dependencies.

Each compute engine (and each of the 16 DMA queues) issues its instructions in program
order; engines run concurrently. An instruction starts when its engine is free and every
earlier instruction it depends on (read-after-write, write-after-read, write-after-write on
overlapping address boxes, the semaphores the compiler would insert) is done. Tracking is
per allocation, so buffers the kernel re-allocates in a loop pipeline freely, while a buffer
reused across iterations serialises its users, as on the hardware.
"""
from collections import Counter

from . import costs, ports

COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
PARTITIONS_PER_DMA_QUEUE = 8   # 16 queues serve 128 partitions
# TensorE accumulates consecutive matmuls into PSUM inside its pipeline, without a semaphore
# round trip. Other engines pay the dependency latency even on their own results (the
# published 189 ns ScalarE read-after-write chain).
PIPELINED_ENGINES = {"tensor"}


def _overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _covers(a, b):
    return a[0] <= b[0] and b[1] <= a[1] and a[2] <= b[2] and b[3] <= a[3]


class Timeline:
    def __init__(self, target, keep_trace=False):
        self.target = target
        self.free_at = dict.fromkeys(COMPUTE_ENGINES, 0.0)
        self.busy = dict.fromkeys(COMPUTE_ENGINES, 0.0)
        self.queue_free_at = [0.0] * target.dma_queues
        self.queue_busy = [0.0] * target.dma_queues
        self.next_queue = 0
        self.port_free_at = {}   # shared SBUF/PSUM port -> time its current user finishes
        self.finish = 0.0
        self.counts = Counter()
        self.trace = [] if keep_trace else None
        self.dma_descriptor_ns = target.dma_descriptor_ns

    # --- dependencies -------------------------------------------------------------------
    @staticmethod
    def _accesses(reads, writes):
        return ([(t.storage, t.box()) for t in reads if t is not None],
                [(t.storage, t.box()) for t in writes if t is not None])

    @staticmethod
    def _ready_after(engine, reads, writes):
        """Earliest start allowed by earlier accesses."""
        pipelined = engine in PIPELINED_ENGINES
        ready = 0.0
        for storage, box in reads:
            for other, (data_ready, done, writer) in storage.writes.items():
                when = done if pipelined and writer == engine else data_ready
                if when > ready and _overlaps(box, other):
                    ready = when
        for storage, box in writes:
            for other, (data_ready, done, writer) in storage.writes.items():
                when = done if pipelined and writer == engine else data_ready
                if when > ready and _overlaps(box, other):
                    ready = when
            for other, done in storage.reads.items():
                if done > ready and _overlaps(box, other):
                    ready = done
        return ready

    @staticmethod
    def _record(engine, reads, writes, done, ready):
        for storage, box in reads:
            if storage.reads.get(box, -1.0) < done:
                storage.reads[box] = done
        for storage, box in writes:
            # Entries this write covers are ordered before it, so it stands in for them.
            for table in (storage.writes, storage.reads):
                for other in [o for o in table if _covers(box, o)]:
                    del table[other]
            storage.writes[box] = (ready, done, engine)

    def _log(self, engine, opcode, start, end):
        self.counts[opcode] += 1
        if self.trace is not None:
            self.trace.append((engine, opcode, start, end))

    # --- issue --------------------------------------------------------------------------
    def compute(self, engine, opcode, cycles, reads=(), writes=()):
        clock = self.target.clock_ghz[engine]
        tiles = [t for t in list(reads) + list(writes) if t is not None]
        cycles *= costs.strided_access_factor(tiles)
        shared = ports.contended_ports(self.target, engine, tiles)
        reads, writes = self._accesses(reads, writes)
        start = max([self.free_at[engine], self._ready_after(engine, reads, writes)]
                    + [self.port_free_at.get(port, 0.0) for port in shared])
        busy = cycles / clock
        done = start + busy
        ready = done + costs.DEPENDENCY_LATENCY / clock
        self.free_at[engine] = done
        for port in shared:
            self.port_free_at[port] = done
        self.busy[engine] += busy
        self._record(engine, reads, writes, done, ready)
        self.finish = max(self.finish, ready)
        self._log(engine, opcode, start, done)

    def dma(self, opcode, rows, descriptors_per_row, descriptor_bytes, reads=(), writes=(),
            rows_per_queue=PARTITIONS_PER_DMA_QUEUE, not_before=0.0):
        """A transfer of `rows` rows, spread over the DMA queues (partition rows: 8 per queue)."""
        queues = self.target.dma_queues
        used = min(queues, max(1, -(-rows // rows_per_queue)))
        rows_per_queue = -(-rows // used)
        per_descriptor = self.dma_descriptor_ns + descriptor_bytes / self.target.dma_peak_bytes_per_ns
        busy = rows_per_queue * descriptors_per_row * per_descriptor
        chosen = [(self.next_queue + i) % queues for i in range(used)]
        self.next_queue = (self.next_queue + used) % queues
        reads, writes = self._accesses(reads, writes)
        start = max([not_before, self._ready_after("dma", reads, writes)] + [self.queue_free_at[q] for q in chosen])
        for q in chosen:
            self.queue_free_at[q] = start + busy
            self.queue_busy[q] += busy
        # Small transfers are bound by the fixed descriptor/semaphore latency, large ones by bandwidth.
        ready = start + max(busy, self.target.dma_fixed_latency_ns)
        self._record("dma", reads, writes, start + busy, ready)
        self.finish = max(self.finish, ready)
        self._log("dma", opcode, start, start + busy)

    def data_ready(self, tiles):
        """When the latest write to any of `tiles` is visible to another engine."""
        return self._ready_after("dma", self._accesses(tiles, ())[0], [])

    def fence(self, time):
        """Nothing issued from now on starts before `time` (a barrier with another core)."""
        for engine in self.free_at:
            self.free_at[engine] = max(self.free_at[engine], time)
        self.queue_free_at = [max(t, time) for t in self.queue_free_at]
        self.finish = max(self.finish, time)

    # --- summary ------------------------------------------------------------------------
    def engine_busy_ns(self):
        busy = dict(self.busy)
        busy["dma"] = max(self.queue_busy)
        return busy
