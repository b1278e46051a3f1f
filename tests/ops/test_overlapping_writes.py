"""Writes whose destination overlaps what they read, or repeats its own elements, behave as on the CPU: refused at
the call with the CPU's error (in asynchronous mode too, behind queued work: the checks need no device data),
leaving the data as it was, or run with the CPU's result where the CPU allows them (overlap it cannot prove,
outputs that are new tensors). Every write path: copy_ within the device and across the host boundary, in-place
ops, out= ops run on the device and out= ops that fall back to the CPU."""
import warnings

import pytest
import torch

from localneuron.adaptive_eager import engine, stats
from localneuron.runtime.environment import read

A, B = (lambda x: x[1:]), (lambda x: x[:-1])  # two views of one 9-element tensor that overlap in 7
SQUARE = (lambda x: x.view(3, 3))

WRITES = {
    "copy_ shifted forward": lambda x: A(x).copy_(B(x)),
    "copy_ shifted back": lambda x: B(x).copy_(A(x)),
    "copy_ into its transpose": lambda x: SQUARE(x).t().copy_(SQUARE(x)),
    "copy_ from its transpose": lambda x: SQUARE(x).copy_(SQUARE(x).t()),
    "copy_ into repeated elements": lambda x: x[:1].expand(3).copy_(x[3:6]),
    "copy_ of another shape": lambda x: x[:3].copy_(x[3:7]),
    "copy_ that would broadcast the destination": lambda x: x[:1].copy_(x[3:6]),
    "copy_ of itself": lambda x: x.copy_(x),
    "copy_ of the same view": lambda x: x[:3].copy_(x[:3]),
    "copy_ of a row from a column (overlap not provable)": lambda x: SQUARE(x)[0].copy_(SQUARE(x)[:, 0]),
    "copy_ converting dtype": lambda x: A(x).copy_(B(x).int()),
    "copy_ from the host into repeated elements": lambda x: x[:1].expand(3).copy_(torch.ones(3)),
    "copy_ from the host of another shape": lambda x: x[:3].copy_(torch.ones(4)),
    "add_ overlapping": lambda x: A(x).add_(B(x)),
    "addcmul_ overlapping": lambda x: A(x).addcmul_(B(x), B(x)),
    "lerp_ overlapping": lambda x: A(x).lerp_(B(x), 0.5),
    "neg_ into repeated elements": lambda x: x[:1].expand(3).neg_(),
    "fill_ into repeated elements": lambda x: x[:1].expand(3).fill_(2.0),
    "add out= overlapping": lambda x: torch.add(B(x), 1, out=A(x)),
    "exp out= overlapping": lambda x: torch.exp(B(x), out=A(x)),
    "cat out= overlapping (falls back)": lambda x: torch.cat([B(x)[:4], B(x)[:4]], out=A(x)),
    "index_copy_ overlapping": lambda x: A(x).index_copy_(0, torch.arange(8, device=x.device), B(x)),
    "masked_scatter_ overlapping": lambda x: A(x).masked_scatter_(torch.ones(8, dtype=torch.bool, device=x.device), B(x)),
    "mm out= into an input": lambda x: torch.mm(SQUARE(x), SQUARE(x), out=SQUARE(x)),
    "sum out= into its input": lambda x: torch.sum(SQUARE(x), 0, out=x[1:4]),
}


def outcome(write, device: str):
    """(error type, first line of the message) or ("ok", the tensor's values afterwards)."""
    x = torch.arange(9.0, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallback warnings
        try:
            write(x)
        except RuntimeError as error:
            return type(error).__name__, str(error).splitlines()[0], x.cpu().tolist()
    return "ok", x.cpu().tolist()


@pytest.mark.parametrize("name", WRITES)
def test_write_behaves_as_on_the_cpu(name):
    assert outcome(WRITES[name], "neuron") == outcome(WRITES[name], "cpu")


def busy_queue():
    """Queued work that keeps the device's stream busy for a while, so that a check made only when the queue
    reaches the write would show up later, at a synchronisation."""
    big = torch.ones(512, 512, device="neuron")
    for _ in range(8):
        big = big @ big / 512
    return big


REFUSED_AT_THE_CALL = [name for name in WRITES if outcome(WRITES[name], "cpu")[0] != "ok"]


@pytest.mark.parametrize("name", REFUSED_AT_THE_CALL)
def test_refusal_is_raised_at_the_call_behind_queued_work_and_changes_nothing(name):
    x = torch.arange(9.0, device="neuron")
    pending = busy_queue()
    expected = outcome(WRITES[name], "cpu")[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised:
            WRITES[name](x)
    assert str(raised.value).splitlines()[0] == expected
    torch.neuron.synchronize()  # nothing left to report later
    assert x.cpu().tolist() == list(range(9))
    assert torch.equal(pending.cpu(), torch.ones(512, 512))  # the device goes on


# In-place writes the CPU refuses for overlap, as calls on two tensors: on one tensor they are the refused writes of
# WRITES; on two separate ones, the same signature (shapes, strides, offsets) with nothing overlapping.
IN_PLACE = {
    "add_ overlapping": lambda x, y: A(x).add_(B(y)),
    "addcmul_ overlapping": lambda x, y: A(x).addcmul_(B(y), B(y)),
    "lerp_ overlapping": lambda x, y: A(x).lerp_(B(y), 0.5),
    "index_copy_ overlapping": lambda x, y: A(x).index_copy_(0, torch.arange(8, device=x.device), B(y)),
}


@pytest.mark.parametrize("name", IN_PLACE)
def test_refusal_is_raised_at_the_call_also_once_the_signature_runs_queued(name):
    """Once harmless calls of a signature have run, later calls of it are queued: an overlapping one among them
    must still be refused at the call, not at the next synchronisation (the order tests run in decided this)."""
    write = IN_PLACE[name]
    assert name in REFUSED_AT_THE_CALL and outcome(lambda x: write(x, x), "cpu") == outcome(WRITES[name], "cpu")
    for _ in range(3):
        write(torch.arange(9.0, device="neuron"), torch.arange(9.0, device="neuron"))
    x = torch.arange(9.0, device="neuron")
    pending = busy_queue()
    with pytest.raises(RuntimeError) as raised:
        write(x, x)
    assert str(raised.value).splitlines()[0] == outcome(WRITES[name], "cpu")[1]
    torch.neuron.synchronize()
    assert x.cpu().tolist() == list(range(9))
    assert torch.equal(pending.cpu(), torch.ones(512, 512))


def test_cases_cover_refused_and_allowed_writes():
    assert len(REFUSED_AT_THE_CALL) >= 15
    assert len(WRITES) - len(REFUSED_AT_THE_CALL) >= 6


@pytest.mark.skipif(read("NEURON_LAUNCH_BLOCKING"), reason="NEURON_LAUNCH_BLOCKING=1 fuses nothing")
@pytest.mark.parametrize("name", ["copy_ shifted forward", "add_ overlapping", "add out= overlapping"])
def test_refusal_inside_a_fused_run(name):
    """Adaptive Eager: the refused write sits between element-wise ops that fuse into one run (compiled at the
    run's second sighting, so the later passes run it fused); the refusal still comes at the call."""
    stats.reset()
    expected = outcome(WRITES[name], "cpu")[1]
    with engine.switched(True):
        for _ in range(4):
            x = torch.arange(9.0, device="neuron")
            y = (x * 2 + 1).relu() - 3
            with pytest.raises(RuntimeError) as raised:
                WRITES[name](x)
            assert str(raised.value).splitlines()[0] == expected
            z = (y * 0.5 + x).abs() * 2
            assert z.cpu().tolist() == ((((torch.arange(9.0) * 2 + 1).relu() - 3) * 0.5 + torch.arange(9.0)).abs()
                                        * 2).tolist()
            assert x.cpu().tolist() == list(range(9))
    assert stats.summary()["fused_launches"] > 0
