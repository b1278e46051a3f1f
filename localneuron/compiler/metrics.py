"""Per-graph compilation metrics (torch_neuronx.get_dynamo_metrics, docs/support-matrix.md#torchcompile) and the
static-shape recompile log the portability report shows.

A "graph" is one executable the backend built: the forward, backward or inference graph of one
Dynamo graph. Recompiles are counted per Dynamo frame: TorchNeuron compiles static shapes only, so
every new input shape of a frame is a new compilation, and the shapes that caused it are kept, with the
"lengths": the sizes of the dimensions that differ between the frame's compilations (a prompt or cache
length, a batch size), which is what padding to buckets bounds.
"""
import atexit
import csv
import io
import sys
import threading
import warnings
from dataclasses import asdict, dataclass, field

import torch

from localneuron.runtime.checked_files import OutputDirectory, OutputError
from localneuron.runtime.environment import ConfigurationError, read


@dataclass
class NeuronCompilationMetrics:
    graph: str                 # "<model_name>_<n>_<kind>"
    model_name: str
    frame: str                 # the Python function Dynamo captured
    compile_id: str            # Dynamo's "<frame>/<attempt>"
    kind: str                  # forward | backward | inference
    node_count: int            # ATen ops in the graph
    compile_time_s: float
    cache: str                 # hit | miss | disabled (one per compiled piece, worst first)
    cache_hits: int
    cache_misses: int
    pieces: int                # compiled pieces (more than one when CPU-fallback ops split the graph)
    eager_ops: list[str]       # ops that run eagerly between the pieces
    recompile: bool
    recompiles: int            # recompiles of the graph's frame so far, this one included
    recompile_reason: str | None
    # TorchNeuron's own fields (its neuron_dynamo_backend/metrics.py), the columns of its graph_stats table:
    graph_id: str = ""           # the persistent cache key of the compiled code ("+"-joined for several pieces)
    graph_name: str = ""         # "<model_name>_<aot id>_<forward|backward|inference>_<nth>", from AOTAutograd's name
    has_collectives: bool = False  # the graph calls functional collectives (all_reduce, all_gather, ...)
    graph_node_count: int = 0    # every FX node (node_count counts the ATen calls)
    timestamp: str = ""          # when the graph's compilation began, "%Y%m%d_%H%M%S_%f" (orders graph breaks)
    torch_neuronx_fx_passes_us: int = 0  # graph analysis before code generation (which ops must run eagerly)
    torch_neuronx_lower_us: int = 0      # TorchNeuron lowers to StableHLO here; localneuron has no such step: 0
    torch_neuronx_compile_us: int = 0    # building the executable, or loading it from the persistent cache

    def as_dict(self) -> dict:
        return asdict(self)


# TorchNeuron's metric tables (TORCH_NEURONX_ENABLED_METRIC_TABLES) and their columns, in its order
METRIC_TABLES = {"graph_stats": ("graph_id", "graph_name", "model_name", "has_collectives", "graph_node_count",
                                 "timestamp", "torch_neuronx_fx_passes_us", "torch_neuronx_lower_us",
                                 "torch_neuronx_compile_us")}
COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d_functional")


@dataclass
class FrameRecord:
    name: str
    signatures: list[tuple]  # one per compilation of the frame, in order
    recompiles: list[dict] = field(default_factory=list)  # {"compile_id", "reason", "shapes", "lengths"}

    @property
    def compiles(self) -> int:
        return len(self.signatures)

    def lengths(self) -> list[int]:
        """The distinct sizes the frame was compiled for, over the dimensions that differ between its
        compilations (empty when only dtypes or the number of inputs changed)."""
        if len({len(s) for s in self.signatures}) != 1:
            return []
        sizes = set()
        for position in range(len(self.signatures[0])):
            shapes = [s[position][0] for s in self.signatures if len(s[position]) == 2]
            if len(shapes) != len(self.signatures) or len({len(shape) for shape in shapes}) != 1:
                continue
            for dim in range(len(shapes[0])):
                seen = {shape[dim] for shape in shapes}
                if len(seen) > 1:
                    sizes |= seen
        return sorted(sizes)


_lock = threading.Lock()
_graphs: list[NeuronCompilationMetrics] = []
_frames: dict[int, FrameRecord] = {}  # Dynamo frame id -> record
_failures: list[dict] = []
_corrupt_cache_entries: list[str] = []


def signature(example_inputs) -> tuple:
    return tuple((tuple(t.shape), str(t.dtype).removeprefix("torch.")) if isinstance(t, torch.Tensor)
                 else (type(t).__name__,) for t in example_inputs)


def _describe(entry: tuple) -> str:
    return f"{list(entry[0])} {entry[1]}" if len(entry) == 2 else entry[0]


def _describe_change(before: tuple, after: tuple) -> str:
    if len(before) != len(after):
        return f"number of graph inputs changed from {len(before)} to {len(after)}"
    changes = [f"input {i}: {_describe(b)} -> {_describe(a)}" for i, (b, a) in enumerate(zip(before, after)) if a != b]
    return "; ".join(changes) if changes else "guard failure without an input shape or dtype change"


def record_frame(frame_id: int, name: str, compile_id: str, example_inputs) -> tuple[int, str | None]:
    """Registers a Dynamo compilation of a frame: (recompiles of it so far, why this one recompiles or None)."""
    sig = signature(example_inputs)
    with _lock:
        record = _frames.get(frame_id)
        if record is None:
            _frames[frame_id] = FrameRecord(name=name, signatures=[sig])
            return 0, None
        reason = _describe_change(record.signatures[-1], sig)
        record.signatures.append(sig)
        lengths = record.lengths()
        if lengths:
            reason += f" (lengths compiled for this frame: {', '.join(map(str, lengths))})"
        record.recompiles.append({"compile_id": compile_id, "reason": reason, "lengths": lengths,
                                  "shapes": [list(s[0]) for s in sig if len(s) == 2]})
        return len(record.recompiles), reason


def has_collectives(gm: torch.fx.GraphModule) -> bool:
    return any(n.op == "call_function" and getattr(n.target, "namespace", None) in COLLECTIVE_NAMESPACES
               for n in gm.graph.nodes)


def record_graph(m: NeuronCompilationMetrics) -> None:
    """Keeps the graph's metrics, counts it in Dynamo's counters["neuron"] and its build time in
    compilation_time_metrics["torch_neuronx_compile"] (as TorchNeuron does), and, the first time, checks the metric
    tables asked for and arranges for them to be written at exit."""
    from torch._dynamo.utils import compilation_time_metrics, counters  # loaded already: Dynamo is compiling

    tables = _tables_to_write()
    with _lock:
        _graphs.append(m)
        counters["neuron"]["compiled_graphs"] += 1
        if m.has_collectives:
            counters["neuron"]["graphs_with_collectives"] += 1
        compilation_time_metrics.setdefault("torch_neuronx_compile", []).append(m.torch_neuronx_compile_us / 1e6)
        if tables and not _exit_writer:
            _exit_writer.append(atexit.register(_write_tables, tables))


_exit_writer: list = []


def _tables_to_write() -> tuple[str, ...]:
    names = read("TORCH_NEURONX_ENABLED_METRIC_TABLES")
    unknown = [name for name in names if name not in METRIC_TABLES]
    if unknown:
        raise ConfigurationError(
            f"TORCH_NEURONX_ENABLED_METRIC_TABLES names {', '.join(map(repr, unknown))}, which is not a metric table; "
            f"the tables are: {', '.join(METRIC_TABLES)}")
    return names


def _write_tables(tables: tuple[str, ...]) -> None:
    """At exit: each table asked for, one CSV per rank in TORCH_NEURONX_METRICS_DIR. A directory that cannot be written
    costs a warning, not the program's exit status."""
    rows = graphs()
    if not rows:
        return
    rank = torch.distributed.get_rank() if torch.distributed.is_available() and torch.distributed.is_initialized() \
        else read("RANK") or 0
    directory = read("TORCH_NEURONX_METRICS_DIR")
    for table in tables:
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(METRIC_TABLES[table])
        writer.writerows([getattr(m, column) for column in METRIC_TABLES[table]] for m in rows)
        name = f"metric_table_{table}_rank{rank}.csv"
        try:
            with OutputDirectory(directory, what="the metric tables (TORCH_NEURONX_METRICS_DIR)") as out:
                out.write(name, text.getvalue())
        except (OutputError, OSError) as error:
            warnings.warn(f"[Neuron] [WARNING] the {table} metric table was not written: {error}", stacklevel=1)


def record_failure(frame: str, error: BaseException, fell_back: bool) -> None:
    with _lock:
        _failures.append({"frame": frame, "error": f"{type(error).__name__}: {error}", "ran_eagerly": fell_back})


def record_corrupt_cache_entry(path: str) -> None:
    with _lock:
        _corrupt_cache_entries.append(path)


def corrupt_cache_entries() -> list[str]:
    with _lock:
        return list(_corrupt_cache_entries)


def graphs() -> list[NeuronCompilationMetrics]:
    with _lock:
        return list(_graphs)


def frames() -> dict[int, FrameRecord]:
    with _lock:
        return dict(_frames)


def failures() -> list[dict]:
    with _lock:
        return list(_failures)


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """Per-graph compilation metrics since the last reset (synchronises the device first, like TorchNeuron)."""
    if torch.neuron.is_available():
        torch.neuron.synchronize()
    return graphs()


def reset_dynamo_metrics() -> None:
    if "torch._dynamo" in sys.modules:  # Dynamo's counters are only there once it was loaded
        from torch._dynamo.utils import compilation_time_metrics, counters
        counters["neuron"].clear()
        compilation_time_metrics.pop("torch_neuronx_compile", None)
    with _lock:
        _graphs.clear()
        _frames.clear()
        _failures.clear()
        _corrupt_cache_entries.clear()
