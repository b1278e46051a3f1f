"""PyTorch integration: kernels on tensors, nki_op in eager / compile / backward, wrap_nki."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import nki
import nki.language as nl
from fresh_python import run_python
from localneuron.nki import nki_op, wrap_nki


def neuron_available():
    return hasattr(torch, "neuron") and torch.neuron.is_available()


DEVICES = ["cpu"] + (["neuron"] if neuron_available() else [])


@nki.jit
def add_kernel(a, b, alpha=1.0):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.multiply(nl.load(b), alpha)))
    return out


@nki.jit
def scale_in_place(a, factor):
    nl.store(a, nl.multiply(nl.load(a), factor))


@nki.jit
def exp_rows(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows = slice(nl.program_id(0) * 128, (nl.program_id(0) + 1) * 128)
    nl.store(out[rows], nl.exp(nl.load(a[rows])))
    return out


@nki_op("test_nki_torch::add", mutates_args={})
def nki_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return add_kernel(a, b)


@nki_op("test_nki_torch::scale_", mutates_args={"a"})
def nki_scale_(a: torch.Tensor, factor: float) -> None:
    scale_in_place(a, factor)


nki_add.register_autograd(lambda ctx, grad: (grad, grad))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_jit_kernel_called_directly_on_tensors(device, dtype):
    a, b = torch.randn(128, 256, dtype=dtype, device=device), torch.randn(128, 256, dtype=dtype, device=device)
    out = add_kernel(a, b, alpha=2.0)
    assert out.device.type == device and out.dtype == dtype
    expected = (a.float() + 2 * b.float()).to(dtype)
    torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_nki_op_eager_and_in_place(device):
    a, b = torch.randn(128, 64, device=device), torch.randn(128, 64, device=device)
    torch.testing.assert_close(nki_add(a, b).cpu(), (a + b).cpu())
    c = a.clone()
    nki_scale_(c, 3.0)
    torch.testing.assert_close(c.cpu(), (3 * a).cpu())


def compiled_graph_targets(fn, *args):
    """Compile with a recording backend; return (result, call targets in the captured graph)."""
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm
    result = torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return result, seen


def test_nki_op_is_one_node_under_torch_compile():
    a, b = torch.randn(128, 64), torch.randn(128, 64)
    result, targets = compiled_graph_targets(lambda x, y: nki_add(x, y) * 2, a, b)
    torch.testing.assert_close(result, 2 * (a + b))
    assert sum("test_nki_torch.add" in t for t in targets) == 1


def test_direct_kernel_calls_and_wrap_nki_grids_compile_without_graph_breaks():
    a, b = torch.randn(128, 64), torch.randn(128, 64)
    result, targets = compiled_graph_targets(lambda x, y: add_kernel(x, y, alpha=0.5) + 1, a, b)
    torch.testing.assert_close(result, a + 0.5 * b + 1)
    assert sum("localneuron_nki.launch" in t for t in targets) == 1
    z = torch.randn(512, 32)
    caller = wrap_nki(exp_rows)
    torch.testing.assert_close(caller[[4]](z), z.exp())
    compiled = torch.compile(lambda t: caller[[4]](t) * 2, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(z), 2 * z.exp())


def test_in_place_kernels_under_compile_update_their_inputs():
    a = torch.randn(128, 64)
    c = a.clone()
    compiled = torch.compile(lambda t: (nki_scale_(t, 2.0), t + 1)[1], backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(c), 2 * a + 1)
    torch.testing.assert_close(c, 2 * a)


@pytest.mark.parametrize("compiled", [False, True])
def test_backward_through_register_autograd(compiled):
    a = torch.randn(128, 64, requires_grad=True)
    b = torch.randn(128, 64, requires_grad=True)
    fn = (lambda x, y: (nki_add(x, y) * y).sum())
    fn = torch.compile(fn, backend="aot_eager", fullgraph=True) if compiled else fn
    fn(a, b).backward()
    torch.testing.assert_close(a.grad, b.detach())
    torch.testing.assert_close(b.grad, a.detach() + 2 * b.detach())


@pytest.mark.skipif(not neuron_available(), reason="the neuron device is not available in this build")
def test_neuron_compile_backend_runs_nki_ops():
    a, b = torch.randn(128, 64, device="neuron"), torch.randn(128, 64, device="neuron")
    compiled = torch.compile(lambda x, y: nki_add(x, y) * 2, backend="neuron", fullgraph=True)
    torch.testing.assert_close(compiled(a, b).cpu(), 2 * (a + b).cpu())


@pytest.mark.skipif(not neuron_available(), reason="the neuron device is not available in this build")
def test_neuron_compile_backend_keeps_direct_kernel_calls_in_one_graph():
    a, b = torch.randn(128, 64, device="neuron"), torch.randn(128, 64, device="neuron")
    compiled = torch.compile(lambda x, y: add_kernel(x, y, alpha=0.5) + 1, backend="neuron", fullgraph=True)
    result = compiled(a, b)
    torch.testing.assert_close(result.cpu(), (a + 0.5 * b + 1).cpu())


def test_a_kernel_call_is_planned_as_a_constant_without_importing_dynamo_at_import():
    """The planning step of a kernel call inside a graph is marked as Dynamo's assume_constant_result marks a function
    (the decorator only sets that attribute; if a torch release does more, this fails), and `import nki` leaves Dynamo
    unimported: it costs every NKI Library file about 2 s of start-up."""
    from localneuron.nki import torch_integration

    marked = torch._dynamo.assume_constant_result(lambda: None)
    assert vars(marked) == {"_dynamo_marked_constant": True}
    assert torch_integration._plan_call._dynamo_marked_constant is True
    r = run_python("import sys, nki; print('torch._dynamo' in sys.modules)")
    assert r.stdout.strip() == "False", r.stdout + r.stderr


def test_fake_tensors_get_shapes_from_a_dry_run_without_recording_a_call():
    nki.clear_kernel_calls()
    with FakeTensorMode():
        a = torch.empty(128, 64, dtype=torch.bfloat16)
        out = add_kernel(a, a)
        assert out.shape == (128, 64) and out.dtype == torch.bfloat16
    assert nki.kernel_calls() == []


def test_kernel_calls_appear_in_the_torch_profiler():
    a = torch.randn(128, 64)
    with torch.profiler.profile() as prof:
        add_kernel(a, a)
    assert any(e.name == "nki::add_kernel" for e in prof.events())


@pytest.mark.skipif(not neuron_available(), reason="the neuron device is not available in this build")
def test_kernel_operands_stay_on_the_device_without_host_transfers():
    from localneuron import _C
    a = torch.randn(128, 64, device="neuron")
    c = a.clone()
    before = _C.transfer_counters()
    out = add_kernel(a, a)
    nki_scale_(c, 2.0)
    after = _C.transfer_counters()
    assert after["host_to_device_bytes"] == before["host_to_device_bytes"]
    assert after["device_to_host_bytes"] == before["device_to_host_bytes"]
    torch.testing.assert_close(out.cpu(), 2 * a.cpu())
    torch.testing.assert_close(c.cpu(), 2 * a.cpu())
