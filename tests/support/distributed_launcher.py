"""Runs a job on real processes on loopback, as torchrun would (env://), for the distributed tests.

A job is a function `job(device: str, **kwargs)` in a test file. `run(...)` starts one process per rank
with the launcher environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT on a
free loopback port), kills all of them after a hard timeout, and returns what each rank's job returned.

`backends` chooses the process groups: for each (device, backend) pair the rank initialises the group, runs the job
and destroys the group, all in one process, so a job can be compared with its CPU + Gloo twin rank by rank (the
reference workflow in docs/support-matrix.md#distributed) at the cost of one launch. The neuron run goes first: the
documented ordering forbids touching the device before init_process_group, and a CPU run leaves it untouched either way.
With `backends=None` the job initialises whatever it needs itself.

Ranks are forked from a server that has imported torch once (multiprocessing's forkserver, preloading torch with
the device backends' autoload off): a fresh interpreter spent over a CPU second importing torch for each rank, about
150 ranks a CI run. The server never loads the device, and each rank takes its launcher environment before it loads
the device backends as torch's import would have, so what a rank sees is what a fresh interpreter sees. What torch
reads while it is imported cannot differ that way: a rank whose environment differs from the server's in anything but
the launcher's and the device's variables (FORKED_RANKS_MAY_SET) runs in a fresh interpreter instead.
"""
import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

PARITY = (("neuron", "neuron"), ("cpu", "gloo"))
GROUP_TIMEOUT = timedelta(seconds=60)  # well under the launch timeout: a stuck collective errors out first


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (the sockets stay open until all are chosen)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# free_ports() closes its sockets before the ranks bind them, so another process (a connection's ephemeral port, the
# other pytest worker's job) can take one meanwhile: the rank's store then fails with this, and the job runs again
PORT_TAKEN = "EADDRINUSE"
PORT_ATTEMPTS = 3


def free_port() -> int:
    return free_ports(1)[0]


def rank_env(rank: int, world_size: int, port: int, local_rank: int | None = None,
             local_world_size: int | None = None) -> dict:
    return {
        "RANK": str(rank), "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank if local_rank is None else local_rank),
        "LOCAL_WORLD_SIZE": str(world_size if local_world_size is None else local_world_size),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }


# What a forked rank may set differently from the server, none of it read by torch's import: the launcher's variables,
# pytest's name of the running test, the device's own (read when a rank loads the device backends), and what a forked
# rank applies itself (the backends' autoload, TORCH_DISTRIBUTED_DEBUG).
FORKED_RANKS_MAY_SET = re.compile(r"(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|"
                                  r"PYTEST_CURRENT_TEST|TORCH_DEVICE_BACKEND_AUTOLOAD|TORCH_DISTRIBUTED_DEBUG|"
                                  r"(LOCALNEURON|NEURON|TORCH_NEURONX)_\w+)")
AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"
_server_environment: dict | None = None   # os.environ when this process started the rank server


def _rank_server():
    """The forkserver context, its server started by this process (once), with torch imported and no device."""
    global _server_environment
    context = multiprocessing.get_context("forkserver")
    if _server_environment is None:
        from multiprocessing import forkserver

        context.set_forkserver_preload(["torch"])
        autoload = os.environ.get(AUTOLOAD)
        os.environ[AUTOLOAD] = "0"   # the server is started with this process's environment
        try:
            forkserver.ensure_running()
        finally:
            if autoload is None:
                del os.environ[AUTOLOAD]
            else:
                os.environ[AUTOLOAD] = autoload
        _server_environment = dict(os.environ)
    return context


def _forkable(environment: dict) -> bool:
    server = _server_environment
    return server is not None and all(FORKED_RANKS_MAY_SET.fullmatch(name)
                                      for name in server.keys() | environment.keys()
                                      if server.get(name) != environment.get(name))


class ForkedRank:
    """A rank forked from the rank server, with the part of subprocess.Popen's interface finish() uses; its output
    (stdout and stderr, in one file as a Popen's pipe held them) is read when it has ended."""

    def __init__(self, context, spec: str, environment: dict, log: str):
        self._log = log
        self._process = context.Process(target=_forked_rank, args=(spec, environment, log))
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self):
        return self._process.exitcode

    def communicate(self, timeout=None):
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout)
        return Path(self._log).read_text(errors="replace"), None

    def kill(self):
        self._process.kill()


def _start_rank(spec: str, environment: dict, log: str):
    context = _rank_server()
    if _forkable(environment):
        return ForkedRank(context, spec, environment, log)
    return subprocess.Popen([sys.executable, __file__, spec], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run(test_file: str, job: str, world_size: int, *, backends=PARITY, kwargs: dict | None = None,
        env: dict | None = None, timeout: float = 120, may_die: frozenset = frozenset()) -> list:
    """Each rank's return value: a dict {device: result} when `backends` is given, else the job's result;
    None for a rank in `may_die` that did not finish (fault tests kill ranks on purpose)."""
    import torch

    for attempt in range(PORT_ATTEMPTS):
        # One rendezvous port per process group the job creates: reusing one would race the next group's
        # clients against the teardown of the previous group's store.
        port, *run_ports = free_ports(1 + len(backends or ()))
        with tempfile.TemporaryDirectory(prefix="neuron-dist-") as out:
            spec = json.dumps({"file": str(Path(test_file).resolve()), "job": job, "kwargs": kwargs or {},
                               "backends": backends, "ports": run_ports, "out": out})
            procs = [_start_rank(spec, {**os.environ, **rank_env(rank, world_size, port), **(env or {})},
                                 os.path.join(out, f"rank{rank}.log"))
                     for rank in range(world_size)]
            logs = finish(procs, timeout)
            failed = [r for r, p in enumerate(procs) if p.returncode != 0 and r not in may_die]
            if failed and attempt + 1 < PORT_ATTEMPTS and any(PORT_TAKEN in logs[r] for r in failed):
                continue  # a port chosen free was taken before the store bound it: the job again, on new ports
            if failed:
                raise AssertionError(f"ranks {failed} of {job} failed:\n" + "\n".join(
                    f"--- rank {r} (exit {procs[r].returncode}) ---\n{logs[r][-4000:]}" for r in failed))
            results = [Path(out) / f"rank{r}.pt" for r in range(world_size)]
            return [torch.load(path, weights_only=False) if path.exists() else None for path in results]


def finish(procs: list, timeout: float) -> list[str]:
    """Waits for every process up to `timeout` seconds in total, then kills the rest; returns their output."""
    import time

    deadline = time.monotonic() + timeout
    logs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\n[killed after the {timeout:.0f} s launch timeout]"
        logs.append(out)
    return logs


def _worker(spec: dict) -> None:
    import importlib.util

    import torch
    import torch.distributed as dist

    module_spec = importlib.util.spec_from_file_location("distributed_job", spec["file"])
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    job = getattr(module, spec["job"])
    if spec["backends"] is None:
        result = job(**spec["kwargs"])
    else:
        result = {}
        for (device, backend), port in zip(spec["backends"], spec["ports"]):
            os.environ["MASTER_PORT"] = str(port)
            dist.init_process_group(backend, timeout=GROUP_TIMEOUT)
            try:
                result[device] = job(device, **spec["kwargs"])
            finally:
                dist.destroy_process_group()
    torch.save(result, Path(spec["out"]) / f"rank{os.environ['RANK']}.pt")


def _forked_rank(spec: str, environment: dict, log: str) -> None:
    """A forked rank's start: its output to its log, its environment, the device backends, then the job."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(environment)
    preloaded = "torch" in sys.modules   # by the server, without the backends; else importing it loads them
    import torch
    import torch.distributed

    torch.distributed.set_debug_level_from_env()   # torch's import read TORCH_DISTRIBUTED_DEBUG in the server
    if preloaded and torch._is_device_backend_autoload_enabled():
        torch._import_device_backends()
    _end(spec)


def _end(spec: str) -> None:
    _worker(json.loads(spec))
    # The result is saved: skip interpreter teardown, where the device core sometimes aborts
    # ("terminate called without an active exception", also without any process group).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _end(sys.argv[1])
