"""`localneuron run` under torchrun / accelerate launch: every rank writes its full report, and rank 0
waits for the ranks of its node (or of the job, with a shared LOCALNEURON_REPORT_DIR) and prints one
merged report."""
import json
import os
import tempfile
import time
from dataclasses import dataclass

from localneuron.distributed.report import REPORT_DIR_ENV
from localneuron.report import portability, rank_merge
from localneuron.runtime.checked_files import OutputDirectory
from localneuron.runtime.environment import read

MERGE_TIMEOUT_ENV = "LOCALNEURON_REPORT_MERGE_TIMEOUT"
# ranks of one job start together; a file whose rank started much earlier is from an earlier job
SAME_JOB_START_SKEW_S = 60.0

STARTED = time.time()


@dataclass(frozen=True)
class Job:
    rank: int
    world_size: int
    expected_ranks: int   # files rank 0 waits for
    directory: OutputDirectory  # checked and opened when the run starts
    run_id: str


def current_job() -> Job | None:
    """This process's rank in a launched job, its report directory opened now (OutputError if it cannot be
    used: another user's, a symlink another user planted, read-only); None outside a multi-rank launch."""
    world_size = read("WORLD_SIZE") or 1
    rank = read("RANK")
    if world_size <= 1 or rank is None:
        return None
    shared = read(REPORT_DIR_ENV)
    # a directory of this user's own unless one is shared on purpose: ranks of one job are one user
    directory = shared or os.path.join(tempfile.gettempdir(), f"localneuron-reports-{os.geteuid()}")
    expected = world_size if shared else (read("LOCAL_WORLD_SIZE") or world_size)
    run_id = "-".join(read(k) or "" for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"))
    safe_run_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    return Job(rank, world_size, expected, OutputDirectory(directory, what=f"the rank reports ({REPORT_DIR_ENV})"),
               safe_run_id)


def _name(job: Job, rank: int) -> str:
    return f"localneuron-run-{job.run_id}-rank{rank}.json"


def _read(job: Job, rank: int) -> dict | None:
    """A rank's report, or None if it is missing, not this user's regular file, or not a report of this job."""
    raw = job.directory.read(_name(job, rank))
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("started"), (int, float)):
        return None
    return data if abs(data["started"] - STARTED) < SAME_JOB_START_SKEW_S else None


def exchange(job: Job, data: dict) -> dict | None:
    """Writes this rank's report; on rank 0, returns the merged report (None on other ranks)."""
    data = {**data, "rank": job.rank, "world_size": job.world_size, "started": STARTED}
    job.directory.write(_name(job, job.rank), portability.to_json(data))
    if job.rank != 0:
        return None
    timeout = read(MERGE_TIMEOUT_ENV)
    deadline = time.monotonic() + timeout
    reports = {0: data}
    while len(reports) < job.expected_ranks and time.monotonic() < deadline:
        for rank in range(job.world_size):
            if rank not in reports and (found := _read(job, rank)) is not None:
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
