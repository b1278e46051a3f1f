"""`localneuron run` under torchrun / accelerate launch: every rank writes its full report, and rank 0
waits for the ranks of its node (or of the job, with a shared LOCALNEURON_REPORT_DIR) and prints one
merged report."""
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from localneuron.profiler import rank_merge
from localneuron.runtime.environment import read

REPORT_DIR_ENV = "LOCALNEURON_REPORT_DIR"
MERGE_TIMEOUT_ENV = "LOCALNEURON_REPORT_MERGE_TIMEOUT"
# ranks of one job start together; a file whose rank started much earlier is from an earlier job
SAME_JOB_START_SKEW_S = 60.0

STARTED = time.time()


@dataclass(frozen=True)
class Job:
    rank: int
    world_size: int
    expected_ranks: int   # files rank 0 waits for
    directory: Path
    run_id: str


def _int_env(name: str, default: int | None = None) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"localneuron run: {name}={value!r} is not an integer (set by the launcher?)") from None


def current_job() -> Job | None:
    world_size = _int_env("WORLD_SIZE", 1)
    if world_size <= 1 or "RANK" not in os.environ:
        return None
    shared = os.environ.get(REPORT_DIR_ENV)
    directory = Path(shared) if shared else Path(tempfile.gettempdir()) / "localneuron-reports"
    expected = world_size if shared else _int_env("LOCAL_WORLD_SIZE", world_size)
    run_id = "-".join(os.environ.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"))
    safe_run_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    return Job(_int_env("RANK"), world_size, expected, directory, safe_run_id)


def _path(job: Job, rank: int) -> Path:
    return job.directory / f"localneuron-run-{job.run_id}-rank{rank}.json"


def _read(path: Path) -> dict | None:
    """A rank's report, or None if it is missing, being written, or not a report of this job."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("started"), (int, float)):
        return None
    return data if abs(data["started"] - STARTED) < SAME_JOB_START_SKEW_S else None


def exchange(job: Job, data: dict) -> dict | None:
    """Writes this rank's report; on rank 0, returns the merged report (None on other ranks)."""
    data = {**data, "rank": job.rank, "world_size": job.world_size, "started": STARTED}
    job.directory.mkdir(parents=True, exist_ok=True)
    path = _path(job, job.rank)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)
    if job.rank != 0:
        return None
    timeout = read(MERGE_TIMEOUT_ENV)
    deadline = time.monotonic() + timeout
    reports = {0: data}
    while len(reports) < job.expected_ranks and time.monotonic() < deadline:
        for rank in range(job.world_size):
            if rank not in reports and (found := _read(_path(job, rank))) is not None:
                reports[rank] = found
        if len(reports) < job.expected_ranks:
            time.sleep(0.2)
    merged, differences = rank_merge.merge(list(reports.values()))
    merged["ranks_merged"] = sorted(reports)
    merged["rank_differences"] = differences
    if len(reports) < job.expected_ranks:
        merged["ranks_missing_note"] = (f"only ranks {sorted(reports)} of {job.world_size} reported within {timeout:.0f} s"
                                        f" ({MERGE_TIMEOUT_ENV} to wait longer; {REPORT_DIR_ENV} on a shared "
                                        "filesystem to merge other nodes)")
    return merged
