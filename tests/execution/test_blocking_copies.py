"""A copy within the device that the user asks to block (copy_ or .to() with non_blocking=False) waits for the current
stream, as TorchNeuron's copy kernels do, through torch_neuronx.current_stream(device).synchronize(); it is a host
synchronisation point the report lists by call site. The copies TorchNeuron leaves to its other paths (float64 and
bool, int32 for .to(), empty tensors, a non-contiguous destination), non_blocking=True, and the copies a device kernel
makes inside one op do not wait."""
import inspect
from unittest.mock import MagicMock, patch

import pytest
import torch
import torch_neuronx

from localneuron.runtime import call_sites, host_syncs


def waits(action) -> int:
    """How many times `action()` waited for the current stream through torch_neuronx.current_stream."""
    with patch("torch_neuronx.current_stream") as current_stream:
        stream = MagicMock()
        current_stream.return_value = stream
        action()
    return stream.synchronize.call_count


def on_device(*shape, dtype=torch.float32):
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape).to(dtype).to("neuron")


def test_a_blocking_copy_within_the_device_waits_once_and_copies():
    src, dst = on_device(4, 4), torch.empty(4, 4, device="neuron")
    assert waits(lambda: dst.copy_(src)) == 1
    assert waits(lambda: dst.copy_(src, non_blocking=False)) == 1
    assert waits(lambda: dst.copy_(on_device(4))) == 1  # broadcast into a contiguous destination
    assert torch.equal(dst.cpu(), torch.arange(4.0).expand(4, 4))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64])
def test_to_another_dtype_waits_once(dtype):
    src = on_device(3, 5)
    result = []
    assert waits(lambda: result.append(src.to(dtype))) == 1  # its inner copy_ is part of the one op
    assert torch.equal(result[0].cpu(), src.cpu().to(dtype))


def test_to_its_own_dtype_copies_nothing_unless_asked():
    src = on_device(3, 5)
    assert waits(lambda: src.to(torch.float32)) == 0  # the tensor itself comes back
    assert waits(lambda: src.to(torch.float32, copy=True)) == 1


@pytest.mark.parametrize("name,action", [
    ("non_blocking copy_", lambda: torch.empty(4, device="neuron").copy_(on_device(4), non_blocking=True)),
    ("non_blocking .to()", lambda: on_device(4).to(torch.bfloat16, non_blocking=True)),
    ("float64 destination", lambda: torch.empty(4, dtype=torch.float64, device="neuron").copy_(on_device(4))),
    ("bool source", lambda: torch.empty(4, device="neuron").copy_(on_device(4) > 1)),
    ("to int32", lambda: on_device(4).to(torch.int32)),
    ("from int32", lambda: on_device(4, dtype=torch.int32).to(torch.float32)),
    ("to float64", lambda: on_device(4).to(torch.float64)),
    ("empty destination", lambda: torch.empty(0, device="neuron").copy_(on_device(0))),
    ("empty source", lambda: on_device(0).to(torch.bfloat16)),
    ("non-contiguous destination", lambda: torch.empty(4, 4, device="neuron").t().copy_(on_device(4, 4))),
    ("to the host", lambda: on_device(4).cpu()),
    ("from the host", lambda: torch.empty(4, device="neuron").copy_(torch.ones(4))),
    ("a decomposition's own casts", lambda: torch.ops.aten.mm.dtype(
        on_device(2, 3, dtype=torch.bfloat16), on_device(3, 2, dtype=torch.bfloat16), torch.float32)),
])
def test_copies_torchneuron_leaves_to_other_paths_do_not_wait(name, action):
    assert waits(action) == 0, name


def test_the_wait_is_real_and_listed_at_the_users_line():
    """Not only the call: the current stream has nothing left to run when the copy returns, and the report counts
    the sync at this file's line."""
    call_sites.clear()
    x = on_device(64, 64)
    for _ in range(6):
        x = x @ x.tanh()
    line = inspect.currentframe().f_lineno + 1
    y = x.to(torch.bfloat16)
    assert torch.neuron.current_stream().query()
    syncs = call_sites.snapshot()["host_sync"][host_syncs.KINDS[host_syncs.BLOCKING_DEVICE_COPY]]
    assert list(syncs) == [f"{__file__}:{line} in test_the_wait_is_real_and_listed_at_the_users_line"]
    assert y.dtype == torch.bfloat16


def test_the_autograd_engines_casts_wait_too():
    """The backward of .to(dtype) is a cast back, issued by the autograd engine's thread: TorchNeuron's kernel waits
    there as well."""
    w = on_device(4, 4).requires_grad_()
    loss = (w.to(torch.bfloat16) * 2).float().sum()
    assert waits(loss.backward) >= 1
    assert torch.equal(w.grad.cpu(), torch.full((4, 4), 2.0))


def test_a_stream_context_waits_for_that_stream():
    stream = torch_neuronx.Stream()
    with torch_neuronx.stream(stream):
        src, dst = on_device(4, 4), torch.empty(4, 4, device="neuron")
        with patch("torch_neuronx.current_stream", wraps=torch_neuronx.current_stream) as current_stream:
            dst.copy_(src)
        assert current_stream.call_args.args == (0,)
    assert torch.equal(dst.cpu(), src.cpu())
