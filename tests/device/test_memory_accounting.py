"""Exact memory accounting: a request that cannot be met raises torch.OutOfMemoryError and moves no
counter but num_ooms (sizes that would overflow the rounding, a full device, a host that cannot back
the device); OOM messages give real sizes; every memory function checks its device index."""
import gc

import pytest
import torch

import torch_neuronx
from fresh_python import run_python


def counters_without_ooms(device: int) -> dict:
    stats = dict(torch.neuron.memory_stats(device))
    return {k: v for k, v in stats.items() if "num_ooms" not in k}


def assert_failed_request_moved_nothing(device: int, request):
    # tensors an earlier test left in reference cycles (a caught error's traceback keeps its frames) are freed now,
    # not by a garbage collection that happens to run during the request
    gc.collect()
    torch.neuron.synchronize(device)
    before, ooms = counters_without_ooms(device), torch.neuron.memory_stats(device)["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError) as error:
        request()
    assert counters_without_ooms(device) == before
    assert torch.neuron.memory_stats(device)["num_ooms"] == ooms + 1
    return str(error.value)


@pytest.mark.parametrize("nbytes", [2**62 - 1, 2**62 + 1, 2**63 - 1, 24 * 2**30 + 1])
def test_sizes_beyond_capacity_or_rounding_range_are_out_of_memory(nbytes):
    keep = torch.ones(10, device="neuron:3")  # a cached block or two must not change the outcome
    message = assert_failed_request_moved_nothing(3, lambda: torch.empty(nbytes, dtype=torch.uint8, device="neuron:3"))
    assert "Neuron out of memory. Tried to allocate" in message and "neuron:3" in message
    assert "EiB" in message or "GiB" in message
    assert (keep + 1).sum().item() == 20.0


def test_cache_is_not_flushed_for_a_request_it_could_not_satisfy():
    torch.neuron.empty_cache()
    x = torch.empty(2**20, dtype=torch.uint8, device="neuron:2")
    del x  # now a cached block
    assert torch.neuron.memory_reserved(2) > torch.neuron.memory_allocated(2)
    assert_failed_request_moved_nothing(2, lambda: torch.empty(30 * 2**30, dtype=torch.uint8, device="neuron:2"))


def test_a_request_that_fits_once_the_cache_is_released_succeeds_and_counts_a_retry():
    code = ("import torch\n"
            "a = torch.empty(600_000, dtype=torch.uint8, device='neuron')\n"
            "del a\n"
            "s = torch.neuron.memory_stats()\n"
            "b = torch.empty(700_000, dtype=torch.uint8, device='neuron')\n"
            "t = torch.neuron.memory_stats()\n"
            "print(t['num_alloc_retries'] - s['num_alloc_retries'], t['num_ooms'], t['reserved_bytes.all.current'])\n")
    r = run_python(code, env={"LOCALNEURON_HBM_BYTES_PER_CORE": "1000000"})
    assert r.returncode == 0, r.stderr
    retries, ooms, reserved = map(int, r.stdout.split())
    assert (retries, ooms) == (1, 0) and 700_000 <= reserved < 1_000_000


def test_host_allocation_failure_after_the_capacity_check_is_out_of_memory_and_moves_nothing():
    # The simulated core has room (64 GiB); the process's address space limit leaves the host none.
    code = ("import resource, torch\n"
            "x = torch.ones(4, device='neuron')\n"
            "vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize'))\n"
            "resource.setrlimit(resource.RLIMIT_AS, (vm + 2**30, resource.RLIM_INFINITY))\n"
            "before = dict(torch.neuron.memory_stats())\n"
            "try:\n"
            "    torch.empty(8 * 2**30, dtype=torch.uint8, device='neuron')\n"
            "except torch.OutOfMemoryError as e:\n"
            "    print('OOM', e)\n"
            "after = dict(torch.neuron.memory_stats())\n"
            "print('changed', sorted(k for k in before if before[k] != after[k]))\n"
            "print('usable', (x * 3).sum().item())\n")
    r = run_python(code, env={"LOCALNEURON_HBM_BYTES_PER_CORE": str(64 * 2**30)})
    assert r.returncode == 0, r.stderr
    assert "OOM Neuron out of memory. Tried to allocate 8.00 GiB" in r.stdout
    assert "the host could not provide the memory" in r.stdout
    assert "changed ['num_ooms']" in r.stdout
    assert "usable 12.0" in r.stdout


def test_an_op_whose_result_does_not_fit_raises_once_and_is_not_retried_on_the_host():
    code = ("import torch, torch_neuronx\n"
            "x = torch.ones(200_000, device='neuron')\n"
            "before = dict(torch.neuron.memory_stats())\n"
            "try:\n    x * 2\n"
            "except torch.OutOfMemoryError:\n    print('OOM')\n"
            "after = dict(torch.neuron.memory_stats())\n"
            "print(sorted(k for k in before if before[k] != after[k]), after['num_ooms'])\n"
            "print('fallbacks', torch_neuronx.get_fallback_ops())\n")
    r = run_python(code, env={"LOCALNEURON_HBM_BYTES_PER_CORE": "1000000"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["OOM", "['num_ooms'] 1", "fallbacks []"]


def test_out_of_memory_message_gives_real_rounded_sizes_and_free_bytes():
    code = ("import torch\n"
            "keep = torch.empty(100, dtype=torch.uint8, device='neuron')\n"
            "try:\n    torch.empty(1000, dtype=torch.float32, device='neuron')\n"
            "except torch.OutOfMemoryError as e:\n    print(e)\n")
    r = run_python(code, env={"LOCALNEURON_HBM_BYTES_PER_CORE": "3000"})
    assert r.returncode == 0, r.stderr
    message = r.stdout
    assert "Tried to allocate 4.00 KiB (4000 bytes requested, rounded up)" in message, message
    assert "total capacity of 2.93 KiB of which 2.43 KiB is free" in message, message
    assert "512 bytes is allocated by tensors" in message, message
    assert "0.00 MiB" not in message


@pytest.mark.parametrize("index", [257, -5, 4, -1, "neuron:257", "neuron:9", torch.device("neuron", 4)])
@pytest.mark.parametrize("module", [torch.neuron, torch.neuron.memory, torch_neuronx, torch_neuronx.memory])
@pytest.mark.parametrize("function", ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                                      "max_memory_reserved", "reset_peak_memory_stats",
                                      "reset_accumulated_memory_stats", "memory_summary", "mem_get_info"])
def test_every_memory_function_refuses_an_invalid_device_index(function, module, index):
    if not hasattr(module, function):
        pytest.skip(f"{module.__name__} has no {function}")
    with pytest.raises(ValueError, match=r"Invalid device id: -?\d+\. Valid range is 0 to 3"):
        getattr(module, function)(index)


def test_the_c_core_checks_the_full_index_before_narrowing_it():
    from localneuron import _C

    for index in (257, 2**40, -2, 4):
        with pytest.raises(RuntimeError, match=f"Device index {index} is out of range"):
            _C.memory_counters(index)
        with pytest.raises(RuntimeError):
            _C.reset_peak_memory(index)
    with pytest.raises(RuntimeError):
        torch.accelerator.memory_stats(-5)
