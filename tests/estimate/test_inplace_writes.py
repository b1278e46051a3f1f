"""In-place ops are priced by what they write and read: a compiled graph writes every argument an op writes, though
the op returns nothing (the optimizers' _foreach_ ops), and reads none that the op overwrites whole (a copy's
destination, an out= destination, a fill's target). Traced on fake neuron tensors by the estimator's Trace."""
import pytest
import torch
from torch.optim.optimizer import _get_foreach_kernels_supported_devices

from localneuron.costmodel.ops import graph_bytes, hbm_traffic
from localneuron.estimate.trace import Trace, fake_device

N = 1 << 16


def traced(run, *tensors) -> tuple[Trace, list]:
    """The trace of run(*tensors), made on fake neuron tensors, and its ops."""
    trace = Trace()
    with trace:
        trace.track(tensors)
        run(*tensors)
    return trace, trace.ops("forward")


def traffic(ops: list, outputs: set) -> tuple[dict, dict]:
    """(key -> bytes written, key -> bytes read) of the ops as one compiled graph whose results are `outputs`."""
    written, read = {}, {}
    for op, writes, reads in hbm_traffic(ops, outputs):
        output_keys = [key for key, _ in op.outputs if key in outputs]
        written.update(zip(output_keys, writes))
        read.update(reads)
    return written, read


@pytest.mark.parametrize("overwrite", [
    lambda dst, src: dst.copy_(src),
    lambda dst, src: torch.mul(src, 2, out=dst),
    lambda dst, src: dst.zero_(),
    lambda dst, src: dst.fill_(1.0),
    lambda dst, src: torch._foreach_copy_([dst], [src]),
], ids=["copy_", "out=", "zero_", "fill_", "_foreach_copy_"])
def test_an_argument_the_op_overwrites_whole_is_written_not_read(overwrite):
    """Refreshing weights from master copies reads the masters and writes the weights, not reading them too."""
    with fake_device():
        dst, src = (torch.empty(N, dtype=torch.float32, device="neuron") for _ in range(2))
        trace, ops = traced(overwrite, dst, src)
        destination, source = trace.key(dst), trace.key(src)
    written, read = traffic(ops, {destination})
    assert written == {destination: 4 * N}
    assert destination not in read
    assert read.get(source, 4 * N) == 4 * N   # a fill reads no source


def test_an_in_place_op_reads_and_writes_what_it_updates_whether_it_returns_it_or_not():
    """mul_ returns its self; _foreach_mul_ returns nothing, yet writes every tensor of its list."""
    with fake_device():
        x, y, z = (torch.empty(N, dtype=torch.float32, device="neuron") for _ in range(3))

        def scale(x, y, z):
            x.mul_(2)
            torch._foreach_mul_([y, z], 2)
        trace, ops = traced(scale, x, y, z)
        keys = {trace.key(t) for t in (x, y, z)}
    written, read = traffic(ops, keys)
    assert written == read == dict.fromkeys(keys, 4 * N)


def _adamw_step_bytes(foreach: bool, parameters: int) -> tuple[int, int]:
    """(HBM bytes of AdamW's steady-state step on `parameters` fp32 tensors of N elements as one compiled graph
    whose results are the parameters and the optimizer state, the parameters' elements)"""
    with fake_device():
        weights = [torch.nn.Parameter(torch.empty(N, device="neuron")) for _ in range(parameters)]
        for w in weights:
            w.grad = torch.empty_like(w)
        optimizer = torch.optim.AdamW(weights, foreach=foreach)
        trace = Trace()
        with trace:
            trace.track(weights + [w.grad for w in weights])
            optimizer.step()   # allocates the moments
            trace.begin("optimizer")
            optimizer.step()
        state = [t for s in optimizer.state.values() for t in s.values()]
        results = {trace.key(t) for t in weights + state}
    return graph_bytes(trace.ops("optimizer"), results), parameters * N


def test_a_foreach_adamw_step_moves_what_the_for_loop_step_moves():
    """Weights, gradients and both moments read, weights and moments written: 28 bytes per fp32 parameter.
    torch picks the foreach implementation for a PrivateUse1 device such as neuron."""
    assert "neuron" in _get_foreach_kernels_supported_devices()
    foreach, elements = _adamw_step_bytes(foreach=True, parameters=4)
    for_loop, _ = _adamw_step_bytes(foreach=False, parameters=4)
    assert foreach >= (4 * 4 + 3 * 4) * elements
    assert foreach == pytest.approx(for_loop, rel=0.02)
