"""Faults (issue 4): when a rank dies or stops answering, the other ranks fail with a clear error within
the process group's timeout instead of hanging. The launcher's hard timeout catches a hang."""
import os
import signal
from datetime import timedelta

import torch
import torch.distributed as dist

from distributed_launcher import run

GROUP_TIMEOUT = timedelta(seconds=5)


def peer_fails(how: str, collective: str = "all_reduce") -> dict | None:
    dist.init_process_group("neuron")  # the default timeout, so that a slow start is no fault
    group = dist.new_group(timeout=GROUP_TIMEOUT)  # the group under test
    t = torch.ones(1 << 16, device="neuron")
    dist.all_reduce(t, group=group)  # it works
    store = dist.distributed_c10d._get_default_store()
    if dist.get_rank() == 1:
        if how == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        store.wait(["survivor_done"], timedelta(seconds=60))  # alive, but no collective: it stopped answering
        store.set("silent_done", "1")
        return None
    try:
        if collective == "recv":  # point-to-point waits are not Gloo collectives: same guarantee
            dist.recv(t, src=1, group=group)
        else:
            dist.all_reduce(t, group=group)
        return {"error": None}
    except Exception as error:  # noqa: BLE001 - the test checks the type and the text
        return {"error": (type(error).__name__, str(error))}
    finally:
        store.set("survivor_done", "1")
        if how == "silent":  # rank 0 serves the store: it stays until rank 1's wait has returned
            store.wait(["silent_done"], timedelta(seconds=60))


def test_survivor_errors_when_a_rank_is_killed():
    survivor, killed = run(__file__, "peer_fails", 2, backends=None, kwargs={"how": "killed"}, may_die={1})
    assert killed is None
    kind, text = survivor["error"]
    assert kind == "DistBackendError"
    assert text.startswith("neuron process group") and "(rank 0 of 2): all_reduce failed:" in text


def test_survivor_errors_within_the_timeout_when_a_rank_stops_answering():
    survivor, _ = run(__file__, "peer_fails", 2, backends=None, kwargs={"how": "silent"})
    kind, text = survivor["error"]
    assert kind == "DistBackendError"
    assert "all_reduce failed" in text and "Timed out" in text


def test_recv_errors_within_the_timeout_when_the_sender_stops_answering():
    survivor, _ = run(__file__, "peer_fails", 2, backends=None, kwargs={"how": "silent", "collective": "recv"})
    kind, text = survivor["error"]
    assert kind == "DistBackendError" and "recv failed" in text
