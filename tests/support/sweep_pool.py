"""Crash-isolated worker pool shared by the sweeps (tests/support/opinfo_sweep.py, tests/support/dispatcher_sweep.py).

The ops are split over a few worker processes (a fixed list each, so a sweep is reproducible), handed
over stdin one at a time. A worker announces each op before it starts it, so when a worker dies
(segfault, abort) or exceeds the per-op timeout, the op it was on is known: it is recorded as a crash /
timeout, a fresh worker continues with the rest of the list, and at the end the op is re-run alone in a
fresh process to tell "also alone" from "in sequence only". A total time budget stops handing out ops;
the ops left are recorded as skipped for that reason.

Protocol (worker stdout, one line each): READY, then per op "START name", any number of "NOTE text" (what
the worker is doing now: the last one is kept with a crash record, e.g. whether the CPU or the device call
died) and "RESULT {json record}".
"""
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

FAULTS_VAR = "SWEEP_FAULTS"  # test hook: "crash:op_a,hang:op_b" makes a worker segfault / hang on that op
WORKER_START_TIMEOUT_S = 120.0  # importing torch (+ op_db) on a busy 2-core machine
MAX_FAILED_STARTS = 3  # a worker killed while starting (load, OOM) is replaced; more failures abort the sweep


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def note(text: str) -> None:
    """Worker side: say what is about to run, so that a crash record can tell."""
    sys.stdout.write("NOTE " + text + "\n")
    sys.stdout.flush()


def serve(run_one, hang_seconds: float, device_faults: bool = True) -> None:
    """Worker loop: run_one(name) -> record dict for each op name read from stdin. device_faults=False: a
    control worker (no device), which the FAULTS_VAR hook, simulating device crashes, leaves alone."""
    import faulthandler

    faulthandler.enable()
    spec = os.environ.get(FAULTS_VAR, "") if device_faults else ""
    faults = {n: k for k, n in (f.split(":", 1) for f in spec.split(",") if ":" in f)}
    out = sys.stdout
    print("READY", flush=True)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        print("START " + name, flush=True)
        if faults.get(name) == "crash":
            faulthandler._sigsegv()
        elif faults.get(name) == "hang":
            time.sleep(hang_seconds)
        t0 = time.time()
        try:
            record = run_one(name)
        except Exception as e:  # noqa: BLE001  (a bug in the sweep itself: report it as such)
            record = {"op": name, "status": "fail", "error": "sweep error: " + first_line(e)}
        record["seconds"] = round(time.time() - t0, 3)
        out.write("RESULT " + json.dumps(record) + "\n")
        out.flush()


class Worker:
    def __init__(self, cmd: list[str], events: queue.Queue, todo: list[str], op_timeout: float):
        self.todo = todo  # this worker's ops, in order
        self.op_timeout = op_timeout
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        env = dict(os.environ, TORCH_NEURONX_LOG_LEVEL="0", PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1, env=env)
        self.current: str | None = None
        self.last_note = ""
        self.deadline = time.time() + WORKER_START_TIMEOUT_S
        self.ready = False
        self.timed_out = None
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        for line in self.proc.stdout:
            events.put((self, line.rstrip("\n")))
        events.put((self, None))  # EOF: the process exited

    def send(self, name: str):
        self.current = name
        self.last_note = ""
        self.deadline = time.time() + self.op_timeout
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        lines = [ln for ln in self.stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        keep = [ln for ln in lines if "Fatal Python error" in ln or "Error" in ln or "Aborted" in ln]
        return (keep[-1] if keep else (lines[-1] if lines else "")).strip()[:300]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def _dead_record(name, kind, detail, during):
    if during:
        detail = f"during {during}; {detail}" if detail else f"during {during}"
    return {"op": name, "status": "fail", "crash": kind, "during": during, "detail": detail,
            "error": f"{kind}: {detail}" if detail else kind}


def _run_queue(names, n_workers, cmd, op_timeout, stop_at, log=None):
    """Run names over n_workers processes; worker i gets names[i::n], in order, so that every op runs after
    the same ops in the same process from one sweep to the next (a device bug that depends on earlier ops
    reproduces). A worker replacing a dead one continues its list. Ops not started by stop_at are left out."""
    events: queue.Queue = queue.Queue()
    results: dict[str, dict] = {}
    n = max(1, min(n_workers, len(names)))
    workers = [Worker(cmd, events, list(names[i::n]), op_timeout) for i in range(n) if names[i::n]]

    def feed(w):
        if w.todo and time.time() < stop_at:
            w.send(w.todo.pop(0))
        else:
            w.current = None
            w.close()

    live = set(workers)
    failed_starts = 0
    while live:
        try:
            w, line = events.get(timeout=1.0)
        except queue.Empty:
            now = time.time()
            for x in list(live):
                if x.proc.poll() is None and now > x.deadline:
                    x.timed_out = f"timeout after {op_timeout:.0f} s" if x.ready else "worker start timeout"
                    x.kill()  # the reader thread then posts EOF, handled below
            continue
        if w not in live:
            continue
        if line is None:  # the worker exited
            live.discard(w)
            w.proc.wait()
            if w.current is not None:
                kind = w.timed_out or f"crash, exit code {w.proc.returncode}"
                results[w.current] = _dead_record(w.current, kind, w.stderr_tail(), w.last_note)
                if log:
                    log(f"worker died on {w.current}: {results[w.current]['error']}")
                w.current = None
            elif not w.ready:
                failed_starts += 1
                why = f"exit code {w.proc.returncode}{', ' + w.timed_out if w.timed_out else ''}: {w.stderr_tail()}"
                if failed_starts > MAX_FAILED_STARTS:
                    raise RuntimeError(f"sweep workers failed to start {failed_starts} times; last: {why}")
                if log:
                    log(f"a sweep worker failed to start ({why}); starting another")
            if w.todo and time.time() < stop_at:
                live.add(Worker(cmd, events, w.todo, op_timeout))
            continue
        if line == "READY":
            w.ready = True
            feed(w)
        elif line.startswith("NOTE "):
            w.last_note = line[len("NOTE "):]
        elif line.startswith("RESULT "):
            record = json.loads(line[len("RESULT "):])
            results[record["op"]] = record
            if log and len(results) % 100 == 0:
                log(f"{len(results)}/{len(names)} done")
            w.current = None
            feed(w)
    return results


def run_isolated(names, cmd, n_workers=2, op_timeout=60.0, budget_s=None, log=None,
                 control_cmd=None, confirm=lambda record: True) -> tuple[dict, list[str]]:
    """Run every op name through worker processes started with cmd. Returns ({name: record}, names left
    undone because the total budget ran out). Crashed / hung ops carry "crash" and are confirmed alone.
    control_cmd: a worker running the op without the device (CPU side only); an op that crashes alone is
    run there too, and its record gets "control": "crash" or "ok" (a crash there too: the CPU kernel
    itself crashed or corrupted memory, e.g. writing out of bounds on an invalid generated input).
    confirm(record) -> False spares the reruns of a crash already explained by the record."""
    stop_at = time.time() + budget_s if budget_s else float("inf")
    results = _run_queue(names, n_workers, cmd, op_timeout, stop_at, log)
    # Each op a worker died on runs again alone in a fresh process: a crash that needs what ran before it
    # in the same process shows up as "in sequence only" (still a device bug: state leaks between ops).
    for name in [n for n in names if results.get(n, {}).get("crash") and confirm(results[n])]:
        first = results[name]
        if log:
            log(f"worker died on {name} ({first['crash']}); re-running it alone")
        alone = _run_queue([name], 1, cmd, op_timeout, float("inf"))[name]
        if alone.get("crash"):
            alone["error"] = f"{alone['crash']}, also alone: {alone['detail']}".rstrip(": ")
            results[name] = alone
        else:
            first["error"] = (f"{first['crash']} in sequence only; alone: {alone['status']}: "
                              f"{first['detail']}").rstrip(": ")
            continue
        if control_cmd:
            control = _run_queue([name], 1, control_cmd, op_timeout, float("inf"))[name]
            results[name]["control"] = "crash" if control.get("crash") else "ok"
    return results, [n for n in names if n not in results]
