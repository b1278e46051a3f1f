"""The simulated device clock: lays estimated device work on the tracks of each NeuronCore.

The host issues work at the time the simulated host clock gives (host_clock.py); the device starts
it when it is issued and its engine is free. Executables of one core run one after another (an eager
executable owns the core), whatever engine does their main work; copies to the device run on the DMA
queue and the next executable waits for them; copies back to the host wait for the core to finish
what it was given. Collectives run on their own queue: one waits for the compute issued before it
(its inputs) and overlaps the compute issued after it; work issued once the host has seen a
collective complete (and so may read its result: the optimizer after DDP's all-reduce) waits for it.
So a step shows queueing, idle gaps where the host is the bottleneck, and collectives overlapping
compute where the program issues them asynchronously.
"""
from dataclasses import dataclass, field

from localneuron.costmodel.work import COLLECTIVES, DMA, DeviceWork


@dataclass
class DeviceSpan:
    core: int
    track: str
    name: str
    start_ns: int
    end_ns: int
    correlation: int
    details: dict = field(default_factory=dict)
    flow: int = 0  # the runtime -> device arrow that ends here
    meta: dict | None = None  # details JSON-encoded for Kineto, when the caller had them already
    work: DeviceWork | None = None  # what the span shows, as the cost model priced it when it was issued


@dataclass
class _Core:
    compute_free: int = 0
    dma_free: int = 0
    inbound_done: int = 0     # end of the latest copy to the device
    collectives_free: int = 0
    results_ready: int = 0    # end of the latest collective whose result the host has seen


class DeviceClock:
    def __init__(self):
        self._cores: dict[int, _Core] = {}
        self.spans: list[DeviceSpan] = []

    def _core(self, core: int) -> _Core:
        return self._cores.setdefault(core, _Core())

    def _place(self, core: int, work: DeviceWork, name: str, start: int, correlation: int, details: dict, flow: int,
               meta: dict | None = None) -> int:
        end = start + max(1, round(work.seconds * 1e9))
        self.spans.append(DeviceSpan(core, work.engine, name, start, end, correlation, details, flow, meta, work))
        return end

    def compute(self, core: int, work: DeviceWork, name: str, issued: int, correlation: int, details: dict,
                flow: int = 0, meta: dict | None = None) -> None:
        """An executable, graph or kernel: it owns the core, on the track of the engine its work names."""
        c = self._core(core)
        start = max(issued, c.compute_free, c.inbound_done, c.results_ready)
        c.compute_free = self._place(core, work, name, start, correlation, details, flow, meta)

    def copy_in(self, core: int, work: DeviceWork, name: str, issued: int, correlation: int, details: dict,
                flow: int = 0) -> None:
        assert work.engine == DMA, work
        c = self._core(core)
        start = max(issued, c.dma_free, c.results_ready)
        c.dma_free = self._place(core, work, name, start, correlation, details, flow)
        c.inbound_done = c.dma_free

    def copy_out(self, core: int, work: DeviceWork, name: str, issued: int, correlation: int, details: dict,
                 flow: int = 0) -> int:
        """Returns when the copy ends: a copy back to the host is what the host waits for."""
        assert work.engine == DMA, work
        c = self._core(core)
        start = max(issued, c.dma_free, c.compute_free, c.results_ready)
        c.dma_free = self._place(core, work, name, start, correlation, details, flow)
        return c.dma_free

    def collective(self, core: int, work: DeviceWork, name: str, issued: int, correlation: int, details: dict,
                   flow: int = 0) -> int:
        """Returns when the collective ends."""
        assert work.engine == COLLECTIVES, work
        c = self._core(core)
        start = max(issued, c.collectives_free, c.compute_free)
        c.collectives_free = self._place(core, work, name, start, correlation, details, flow)
        return c.collectives_free

    def result_seen(self, core: int, collective_end: int) -> None:
        """The host has seen a collective of this core complete: work issued from now on may read its result."""
        c = self._core(core)
        c.results_ready = max(c.results_ready, collective_end)
