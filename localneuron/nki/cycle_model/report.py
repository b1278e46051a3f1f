"""What a kernel run reports: estimated latency, per-engine busy time and the bottleneck."""
from dataclasses import dataclass, field


@dataclass
class KernelReport:
    kernel: str
    target: str
    latency_ns: float
    engine_busy_ns: dict
    instruction_counts: dict
    sbuf_peak_bytes: int
    psum_peak_bytes: int
    numerics: bool
    outputs: object = None
    trace: list = field(default=None, repr=False)

    @property
    def latency_us(self):
        return self.latency_ns / 1000.0

    @property
    def latency_ms(self):
        return self.latency_ns / 1e6

    @property
    def bottleneck(self):
        """The engine with the most busy time: the one to optimise first."""
        engine, busy = max(self.engine_busy_ns.items(), key=lambda item: item[1])
        return engine if busy > 0 else "none"

    def utilisation(self, engine):
        return self.engine_busy_ns[engine] / self.latency_ns if self.latency_ns else 0.0

    def summary(self):
        engines = ", ".join(f"{e} {self.engine_busy_ns[e] / 1000:.1f} us ({100 * self.utilisation(e):.0f}%)"
                            for e in ("tensor", "vector", "scalar", "gpsimd", "dma"))
        return (f"{self.kernel} on {self.target}: estimated {self.latency_us:.1f} us, "
                f"bottleneck {self.bottleneck}; busy: {engines}")

    def as_record(self):
        return {"name": self.kernel, "target": self.target, "estimated_ns": self.latency_ns,
                "bottleneck": self.bottleneck, "engine_busy_ns": dict(self.engine_busy_ns),
                "instructions": sum(self.instruction_counts.values()), "numerics": self.numerics}

    def trace_events(self, start_us=0.0):
        """The per-engine instruction timeline (benchmark(..., trace=True)) as Chrome-trace
        complete events, one track per engine, for a profiler to place at `start_us`."""
        if self.trace is None:
            raise ValueError("this report has no timeline; run nki.benchmark(kernel, trace=True)")
        return [{"name": opcode, "ph": "X", "pid": f"{self.kernel} (estimated, {self.target})", "tid": engine,
                 "ts": start_us + begin / 1000.0, "dur": (end - begin) / 1000.0, "cat": "nki"}
                for engine, opcode, begin, end in self.trace]

    # nki.benchmark (legacy) exposed percentiles in microseconds; a simulation has one value.
    @property
    def nc_latency(self):
        return _Latency(self.latency_us)


@dataclass
class _Latency:
    us: float

    def get_latency_percentile(self, percentile):
        return self.us
