"""Process-group behaviour of the `neuron` backend (docs/support-matrix.md#distributed): one core per rank, the init
ordering assertion, composite backend strings, subgroups, and the documented refusals."""
import os

import pytest
import torch
import torch.distributed as dist

from distributed_launcher import run

NEURON_ONLY = (("neuron", "neuron"),)


def placement(device: str) -> dict:
    x = torch.ones(1, device=device)
    return {"current": torch.neuron.current_device(), "tensor_index": x.device.index,
            "visible": os.environ["NEURON_RT_VISIBLE_CORES"], "backend": dist.get_backend()}


def test_each_rank_owns_core_local_rank():
    for rank, result in enumerate(run(__file__, "placement", 2, backends=NEURON_ONLY)):
        assert result["neuron"] == {"current": rank, "tensor_index": rank, "visible": str(rank), "backend": "neuron"}


def init_with_device_id() -> str:
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("neuron", device_id=torch.device("neuron", local_rank))
    t = torch.ones(1, device="neuron")
    dist.all_reduce(t)
    dist.destroy_process_group()
    return str(t.device), t.item()


def test_init_with_device_id():
    for rank, (device, total) in enumerate(run(__file__, "init_with_device_id", 2, backends=None)):
        assert device == f"neuron:{rank}" and total == 2.0


def touch_then_init() -> str:
    torch.ones(1, device="neuron")
    with pytest.raises(AssertionError) as error:
        dist.init_process_group("neuron")
    return str(error.value)


def test_touching_the_device_before_init_asserts():
    for message in run(__file__, "touch_then_init", 2, backends=None):
        assert message == "Neuron runtime should not be initialized before the init_process_group."


def init_with_several_cores() -> str:
    with pytest.raises(AssertionError) as error:
        dist.init_process_group("neuron")
    return str(error.value)


def test_more_than_one_visible_core_per_rank_asserts():
    for message in run(__file__, "init_with_several_cores", 2, backends=None, env={"NEURON_RT_VISIBLE_CORES": "0-1"}):
        assert message.startswith("Attempted to have more than one device per process in distributed setup")


def composite(device: str) -> dict:
    on_device, on_host = torch.full((2,), 1.0 + dist.get_rank(), device="neuron"), torch.ones(2)
    dist.all_reduce(on_device)
    dist.all_reduce(on_host)
    return {"device": on_device.cpu(), "host": on_host}


def test_composite_backend_string():
    for result in run(__file__, "composite", 2, backends=(("neuron", "cpu:gloo,neuron:neuron"),)):
        assert torch.equal(result["neuron"]["device"], torch.full((2,), 3.0))
        assert torch.equal(result["neuron"]["host"], torch.full((2,), 2.0))


def subgroups_and_refusals(device: str) -> dict:
    rank = dist.get_rank()
    pair = dist.new_group([0, 1])
    singles = [dist.new_group([0]), dist.new_group([1])]
    t = torch.full((2,), 1.0 + rank, device=device)
    dist.all_reduce(t, group=pair)
    alone = torch.full((2,), 1.0 + rank, device=device)
    dist.all_reduce(alone, group=singles[rank])
    errors = {}
    attempts = {
        "barrier_on_subgroup": lambda: dist.barrier(group=pair),
        "uneven_all_to_all": lambda: dist.all_to_all_single(
            torch.empty(3, device=device), torch.ones(3, device=device), [1, 2], [2, 1]),
        "recv_anysource": lambda: dist.recv(torch.empty(1, device=device)),
        "monitored_barrier": lambda: dist.monitored_barrier(),
        "avg_of_integers": lambda: dist.all_reduce(torch.ones(1, dtype=torch.int32, device=device),
                                                   op=dist.ReduceOp.AVG),
        "mixed_devices": lambda: dist.all_gather_into_tensor(torch.empty(2, device=device), torch.ones(1)),
        # Last: c10d leaves the group in coalescing mode when an error escapes _coalescing_manager.
        "reduce_scatter_coalesced": lambda: _coalesced_reduce_scatter(device),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            errors[name] = None
        except Exception as error:  # noqa: BLE001 - the type and text are what the test checks
            errors[name] = (type(error).__name__, str(error))
    return {"pair": t.cpu(), "alone": alone.cpu(), "errors": errors}


def _coalesced_reduce_scatter(device: str) -> None:
    from torch.distributed.distributed_c10d import _coalescing_manager

    with _coalescing_manager(device=torch.device(device)):
        dist.reduce_scatter(torch.empty(1, device=device), [torch.ones(1, device=device)] * 2)


def test_subgroups_and_documented_refusals():
    for rank, result in enumerate(run(__file__, "subgroups_and_refusals", 2, backends=NEURON_ONLY)):
        got = result["neuron"]
        assert torch.equal(got["pair"], torch.full((2,), 3.0))
        assert torch.equal(got["alone"], torch.full((2,), 1.0 + rank))
        errors = got["errors"]
        kind, text = errors["barrier_on_subgroup"]
        assert kind == "NotImplementedError" and text.startswith("Barrier is implemented only for default group")
        kind, text = errors["uneven_all_to_all"]
        assert kind == "NotImplementedError" and text.startswith(
            "alltoall_base: Only even split sizes are supported. Got")
        for name in ("reduce_scatter_coalesced", "recv_anysource"):
            assert errors[name][0] == "NotImplementedError", (name, errors[name])
        assert errors["monitored_barrier"] is not None  # torch refuses it for every backend but Gloo
        assert errors["avg_of_integers"][0] == "ValueError"
        assert errors["mixed_devices"][0] == "ValueError"


def test_local_rank_is_derived_through_the_store_without_launcher_variables(monkeypatch):
    from localneuron.distributed import rank_device

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    store = dist.HashStore()
    store.set("localneuron/host/0", "other-host")  # rank 0 lives elsewhere, ranks 1 and 2 here
    store.set("localneuron/host/1", __import__("socket").gethostname())
    assert rank_device._local_rank_and_size(store, 2, 3) == (1, 2)
