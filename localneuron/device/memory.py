"""Device memory statistics and control (torch.neuron.memory_* and torch_neuronx.memory_*)."""
import pickle
import sys

from localneuron import _C
from localneuron.device.devices import device_index
from localneuron.runtime.checked_files import write_output
from localneuron.runtime.units import bytes_text


def _counters(device) -> dict:
    return _C.memory_counters(device_index(device))


def memory_stats(device=None) -> dict:
    """The caching-allocator statistics: PyTorch's flat keys (as torch.accelerator.memory_stats gives
    them) plus the nested form TorchNeuron documents."""
    c = _counters(device)
    allocated = {"current": c["allocated_current"], "peak": c["allocated_peak"],
                 "allocated": c["allocated_total"], "freed": c["freed_total"]}
    reserved = {"current": c["reserved_current"], "peak": c["reserved_peak"],
                "allocated": c["reserved_total"], "freed": c["reserved_freed_total"]}
    stats = {
        "allocated_bytes": allocated, "active_bytes": dict(allocated), "reserved_bytes": reserved,
        "num_alloc_retries": c["alloc_retries"], "num_ooms": c["ooms"],
        "num_tensor_frees": c["tensor_frees"], "allocation_requests": c["alloc_requests"],
        "device_capacity_bytes": c["capacity"],
    }
    for name in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes"):
        source = reserved if name == "reserved_bytes" else allocated
        for field, value in source.items():
            stats[f"{name}.all.{field}"] = value
    stats["num_alloc_retries"] = c["alloc_retries"]
    stats.update({f"host_{key}": value for key, value in host_memory_stats().items()})
    return stats


def host_memory_stats_as_nested_dict() -> dict:
    """The pinned host allocator's statistics, with torch.cuda.host_memory_stats()'s names (blocks are
    rounded to a power of two), plus locked_bytes (really page-locked) and lock_refusals (blocks the OS
    would not lock, e.g. under RLIMIT_MEMLOCK; they are still pinned as far as PyTorch is concerned)."""
    return _C.host_memory_counters()


def host_memory_stats() -> dict:
    """host_memory_stats_as_nested_dict() with flat keys ("allocated_bytes.current"), as torch.cuda gives them."""
    flat = {}
    for key, value in host_memory_stats_as_nested_dict().items():
        if isinstance(value, dict):
            flat.update({f"{key}.{field}": v for field, v in value.items()})
        else:
            flat[key] = value
    return flat


def reset_peak_host_memory_stats() -> None:
    _C.reset_host_peak_memory()


def reset_accumulated_host_memory_stats() -> None:
    _C.reset_host_accumulated_memory()


def memory_allocated(device=None) -> int:
    return _counters(device)["allocated_current"]


def max_memory_allocated(device=None) -> int:
    return _counters(device)["allocated_peak"]


def memory_reserved(device=None) -> int:
    return _counters(device)["reserved_current"]


def max_memory_reserved(device=None) -> int:
    return _counters(device)["reserved_peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak_memory(device_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _C.reset_accumulated_memory(device_index(device))


def empty_cache() -> None:
    """Returns cached free device blocks to the runtime and unlocks cached pinned host blocks; live
    tensors are untouched."""
    for index in range(_C.device_count()):
        _C.empty_cache(index)
    _C.empty_host_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    c = _counters(device)
    return c["capacity"] - c["reserved_current"], c["capacity"]


def memory_summary(device=None, abbreviated: bool = False) -> str:
    index = device_index(device)
    c = _C.memory_counters(index)
    rows = [
        ("Allocated memory", c["allocated_current"], c["allocated_peak"], c["allocated_total"], c["freed_total"]),
        ("Reserved memory", c["reserved_current"], c["reserved_peak"], c["reserved_total"], c["reserved_freed_total"]),
    ]
    lines = [
        f"|{'=' * 75}|",
        f"| Neuron Memory Summary, Device neuron:{index} (simulated HBM of "
        f"{bytes_text(c['capacity'])})".ljust(76) + "|",
        f"|{'-' * 75}|",
        f"| {'Metric':<22}|{'Cur Usage':>13}|{'Peak Usage':>13}|{'Tot Alloc':>12}|{'Tot Freed':>11}|",
        f"|{'-' * 75}|",
    ]
    for name, cur, peak, total, freed in rows:
        lines.append(f"| {name:<22}|{bytes_text(cur):>13}|{bytes_text(peak):>13}|{bytes_text(total):>12}|"
                     f"{bytes_text(freed):>11}|")
    if not abbreviated:
        lines.append(f"|{'-' * 75}|")
        lines.append(f"| {'Allocation requests':<22}|{c['alloc_requests']:>13}|{'':>13}|{'':>12}|{'':>11}|")
        lines.append(f"| {'Tensor frees':<22}|{c['tensor_frees']:>13}|{'':>13}|{'':>12}|{'':>11}|")
        lines.append(f"| {'Alloc retries':<22}|{c['alloc_retries']:>13}|{'':>13}|{'':>12}|{'':>11}|")
        lines.append(f"| {'Out-of-memory errors':<22}|{c['ooms']:>13}|{'':>13}|{'':>12}|{'':>11}|")
    lines.append(f"|{'=' * 75}|")
    return "\n".join(lines) + "\n"


MEMORY_HISTORY_ENABLED = (None, "state", "all")
MEMORY_HISTORY_STACKS = ("python", "all")


def _record_memory_history(enabled="all", context="all", stacks="python", max_entries=sys.maxsize, device=None,
                           clear_history=False) -> None:
    """Records every device allocation and free with its Python stack, like
    torch.cuda.memory._record_memory_history; _snapshot() / _dump_snapshot() give it to PyTorch's memory
    visualiser (pytorch.org/memory_viz). enabled=None stops recording and drops the history."""
    if enabled not in MEMORY_HISTORY_ENABLED:
        raise ValueError(f"_record_memory_history(enabled={enabled!r}): expected one of {MEMORY_HISTORY_ENABLED}")
    if stacks not in MEMORY_HISTORY_STACKS:
        raise ValueError(f"_record_memory_history(stacks={stacks!r}): expected one of {MEMORY_HISTORY_STACKS} "
                         "(C++ frames are not recorded on the neuron device; 'all' records the Python ones)")
    if not isinstance(max_entries, int) or max_entries <= 0:
        raise ValueError(f"_record_memory_history(max_entries={max_entries!r}): expected a positive integer")
    if clear_history:
        _C.record_memory_history(False, True, 1)
    _C.record_memory_history(enabled is not None, context is not None, min(max_entries, sys.maxsize))


def _snapshot(device=None) -> dict:
    """The recorded history and the blocks it saw, in torch.cuda.memory._snapshot()'s format."""
    return _C.memory_snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle") -> None:
    write_output(filename, pickle.dumps(_snapshot()), "the memory snapshot")
