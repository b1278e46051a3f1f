import os
import sys
import warnings

import pytest
import torch

# Helper modules shared by tests (sweeps, launchers, tiny models) live in tests/support/, apart from the tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))

import localneuron  # noqa: F401  (the device, also when autoload is disabled)
import torch_neuronx


@pytest.fixture
def tracking():
    torch_neuronx.clear_op_tracking()
    yield torch_neuronx
    torch_neuronx.clear_op_tracking()


@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def to_neuron(*tensors):
    return [t.to("neuron") for t in tensors]


@pytest.fixture(autouse=True)
def _back_on_device_zero():
    yield
    torch.neuron.set_device(0)


@pytest.fixture(autouse=True)
def _no_failure_left_untold():
    """A test must not leave a failed queued op that no thread was told of: the test process would exit with status
    1 when the session ends (csrc/queue/held_errors.h), far from the test that caused it."""
    yield
    from localneuron import _C

    _C.drain_all_queues()
    untold = _C.take_unreported_failures()
    assert not untold, "the test left queued failures no synchronisation point reported:\n" + "\n".join(untold)
