"""The distributed section of the portability report: collectives issued by kind, bytes moved, time in them.

`collect()` gives the JSON-able data and `render(data)` its text lines, for `localneuron run`.
Under a launcher, each rank can also leave its own file: with LOCALNEURON_REPORT_DIR set, a rank that
created a `neuron` process group writes `<dir>/localneuron-report-rank<RANK>.json` at exit.

Bytes follow nccl-tests' "size": the larger of a call's input and output buffers on this rank (all-gather
counts its output, reduce-scatter its input). Seconds run from issue to completion of each call, so
overlapped collectives (DDP buckets) each count their own time.
"""
import atexit
import json

from localneuron.distributed import stats
from localneuron.runtime import report_sections
from localneuron.runtime.checked_files import OutputDirectory
from localneuron.runtime.environment import read
from localneuron.runtime.units import bytes_text

REPORT_DIR_ENV = "LOCALNEURON_REPORT_DIR"


def collect() -> dict:
    kinds = {kind: {"calls": s.calls, "bytes": s.bytes, "seconds": round(s.seconds, 6),
                    "estimated_seconds": s.estimated_seconds}
             for kind, s in sorted(stats.snapshot().items())}
    total = {field: sum(k[field] for k in kinds.values())
             for field in ("calls", "bytes", "seconds", "estimated_seconds")}
    return {"transport": "gloo", "collectives": kinds, "total": total}


def render(data: dict) -> list[str]:
    total = data["total"]
    if not total["calls"]:
        return []  # the backend is loaded with every process; a run without collectives has nothing to say
    lines = [f"Collectives (neuron process groups, {data['transport']} transport): {total['calls']} calls, "
             f"{bytes_text(total['bytes'])}, {total['seconds']:.3f} s here; estimated on Trainium "
             f"{total['estimated_seconds'] * 1e3:.2f} ms (cost model)"]
    width = max(len(kind) for kind in data["collectives"])
    for kind, s in data["collectives"].items():
        lines.append(f"  {kind:<{width}}  {s['calls']:>6} calls  {bytes_text(s['bytes']):>10}  {s['seconds']:>9.3f} s")
    return lines


report_sections.register("distributed", collect, render)  # the section is in the report once this layer is used

_rank_file: dict = {}  # rank and world size of the latest world group; written once, at exit


def write_at_exit(rank: int, world_size: int) -> None:
    """Arranges for this rank's file to be written at exit, if LOCALNEURON_REPORT_DIR asks for it; the
    directory is checked and opened now (OutputError names it if it cannot be used)."""
    path = read(REPORT_DIR_ENV)
    if path:
        if not _rank_file:
            atexit.register(_write, OutputDirectory(path, what=f"the rank report ({REPORT_DIR_ENV})"))
        _rank_file.update(rank=rank, world_size=world_size)


def _write(directory: OutputDirectory) -> None:
    data = {**_rank_file, "distributed": collect()}
    directory.write(f"localneuron-report-rank{data['rank']}.json", json.dumps(data, indent=2) + "\n")
