"""Signals sent to the process reach Python: a NeuronCore queue's worker thread starts with the process-directed
signals blocked (Ctrl-C's SIGINT, SIGTERM, SIGALRM...), so the kernel delivers them to a Python thread, where
Python runs their handlers. Delivered to a worker, a Ctrl-C left the main thread asleep in time.sleep() until it
woke by itself (csrc/queue/queue.cpp start_without_process_signals). Faults stay the faulting thread's own.
Checked in a fresh interpreter, where the threads a first device op starts are the queue's."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fresh_python import interruptible, run_python

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads threads' signal masks in /proc")

MASKS = textwrap.dedent("""
    import json, os, re, threading
    def masks():
        out = {}
        for task in os.listdir("/proc/self/task"):
            status = open(f"/proc/self/task/{task}/status").read()
            out[int(task)] = int(re.search(r"SigBlk:\\s*([0-9a-f]+)", status).group(1), 16)
        return out
    import torch
    before = masks()
    streams = [torch.neuron.Stream() for _ in range(2)]
    for stream in streams:
        with torch.neuron.stream(stream):
            (torch.ones(8, device="neuron") * 2).sum()
    torch.neuron.synchronize()
    after = masks()
    print(json.dumps({"main": after[threading.get_native_id()],
                      "started": [mask for tid, mask in after.items() if tid not in before]}))
""")


def _blocks(mask: int, signum: int) -> bool:
    return bool(mask >> (signum - 1) & 1)


def test_queue_workers_block_process_signals_and_python_keeps_them():
    r = run_python(MASKS, env={"NEURON_LAUNCH_BLOCKING": "0", "NEURON_RT_ENABLE_HOST_CC": "1"})
    assert r.returncode == 0, r.stderr
    masks = json.loads(r.stdout.strip().splitlines()[-1])
    assert masks["started"], "the device ops started no queue worker"
    for mask in masks["started"]:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
            assert _blocks(mask, signum), (signal.Signals(signum).name, hex(mask))
        for signum in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE):
            assert not _blocks(mask, signum), (signal.Signals(signum).name, hex(mask))
    assert not _blocks(masks["main"], signal.SIGINT)   # the creating thread's mask is restored


def test_ctrl_c_interrupts_a_sleep_while_queue_workers_run(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(textwrap.dedent("""
        import time
        import torch
        streams = [torch.neuron.Stream() for _ in range(4)]
        for stream in streams:
            with torch.neuron.stream(stream):
                (torch.ones(8, device="neuron") * 2).sum()
        torch.neuron.synchronize()
        try:   # "ready" is printed inside: the signal may arrive while print returns
            print("ready", flush=True)
            time.sleep(300)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """))
    process = interruptible([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NEURON_LAUNCH_BLOCKING": "0", "NEURON_RT_ENABLE_HOST_CC": "1"})
    try:
        assert process.stdout.readline().strip() == "ready"
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert "interrupted" in stdout, stderr
    assert time.monotonic() - started < 60   # not the sleep's 300 s
