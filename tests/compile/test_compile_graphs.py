"""Which graphs the neuron backend builds: graph breaks, ops that run eagerly between compiled pieces,
fullgraph=True errors, static shapes (dynamic=True rejected, one recompile per new shape), modes and
options."""
import logging

import pytest
import torch
import torch_neuronx
from compile_models import ConvBN, compile_cache  # noqa: F401

from localneuron.compiler import inductor, report

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(autouse=True)
def fresh_metrics():
    torch_neuronx.reset_dynamo_metrics()
    yield


def graphs():
    return torch_neuronx.get_dynamo_metrics()


def test_graph_break_compiles_each_piece_and_fullgraph_names_the_break():
    def f(x):
        y = x.sin() * 2
        torch._dynamo.graph_break()
        return y.cos() + 1

    x = torch.randn(3, 4)
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(out.cpu(), f(x))
    assert len({g.compile_id for g in graphs()}) == 2
    torch._dynamo.reset()  # f's compiled code is cached; fullgraph=True must trace it again
    with pytest.raises(Exception, match="graph_break"):
        torch.compile(f, backend="neuron", fullgraph=True)(x.to("neuron"))


def test_cpu_fallback_op_splits_the_graph_and_is_tracked():
    def f(x):
        return torch.linalg.inv(x * 2 + 3 * torch.eye(4, device=x.device)).relu() + 1

    x = torch.randn(4, 4, requires_grad=True)
    dx = x.detach().to("neuron").requires_grad_()
    torch_neuronx.clear_op_tracking()
    out = torch.compile(f, backend="neuron")(dx)
    expected = f(x)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)
    assert "aten::linalg_inv_ex" in torch_neuronx.get_fallback_ops()
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(dx.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)
    forward, backward = graphs()
    assert forward.pieces == 2 and forward.eager_ops == ["aten::linalg_inv_ex"]
    assert backward.kind == "backward"
    assert "split   1 graph(s) at aten::linalg_inv_ex" in "\n".join(report.render(report.collect()))


def test_fullgraph_rejects_a_cpu_fallback_op_by_name():
    def f(x):
        return torch.linalg.inv(x + 1)

    with pytest.raises(Exception, match="linalg_inv_ex.*fullgraph=True"):
        torch.compile(f, backend="neuron", fullgraph=True)(torch.randn(4, 4, device="neuron"))


def test_dynamic_true_is_rejected_at_compile_time():
    with pytest.raises(Exception, match="Unbounded dynamism is disabled"):
        torch.compile(lambda x: x * 2, backend="neuron", dynamic=True)(torch.randn(4, 3, device="neuron"))


def test_new_input_shape_recompiles_a_static_graph_and_reports_the_shapes():
    def f(x):
        return (x * x).sum(1)

    compiled = torch.compile(f, backend="neuron")
    for rows in (4, 6, 4):
        x = torch.randn(rows, 8)
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), f(x))
    first, second = graphs()
    assert not first.recompile and first.recompiles == 0
    assert second.recompile and second.recompiles == 1
    assert "[4, 8] float32 -> [6, 8] float32" in second.recompile_reason
    lines = "\n".join(report.render(report.collect()))
    assert "Recompiles (static shapes: one graph per input shape): 1" in lines and "[6, 8]" in lines


def test_entry_points_decorator_and_module_compile():
    assert "neuron" in torch._dynamo.list_backends(exclude_tags=())

    @torch.compile(backend="neuron")
    def halve(x):
        return x / 2

    assert halve(torch.full((2,), 6.0, device="neuron")).cpu().tolist() == [3.0, 3.0]
    # Module.compile compiles the module's own forward (torch.nn built-ins like Linear are skipped by Dynamo).
    model = ConvBN().to("neuron").eval()
    x = torch.randn(2, 3, 6, 6, device="neuron")
    with torch.no_grad():
        expected = model(x).cpu()
        model.compile(backend="neuron")
        torch.testing.assert_close(model(x).cpu(), expected)
    assert graphs()[-1].frame.startswith("forward (")


def test_non_default_mode_warns_and_compiles(caplog):
    with caplog.at_level(logging.WARNING):
        out = torch.compile(lambda x: x + 1, backend="neuron", mode="max-autotune")(torch.zeros(2, device="neuron"))
    assert "Neuron backend does not support mode='max-autotune', falling back to default mode." in caplog.text
    assert out.cpu().tolist() == [1.0, 1.0]


def test_model_name_option_names_the_graphs():
    torch.compile(lambda x: x - 1, backend="neuron", options={"model_name": "tiny"})(torch.zeros(2, device="neuron"))
    (graph,) = graphs()
    assert graph.model_name == "tiny" and graph.graph.startswith("tiny_") and graph.graph.endswith("_inference")


def _failing_compiler(*args, **kwargs):
    raise RuntimeError("simulated code generator failure")


def test_compile_failure_raises_by_default(monkeypatch):
    monkeypatch.setattr(inductor, "compile_graph", _failing_compiler)
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    with pytest.raises(Exception, match="simulated code generator failure"):
        torch.compile(lambda x: x * 3, backend="neuron")(torch.ones(2, device="neuron"))


@pytest.mark.parametrize("how", ["option", "environment"])
def test_fallback_execution_runs_the_graph_eagerly_with_a_warning(monkeypatch, how):
    monkeypatch.setattr(inductor, "compile_graph", _failing_compiler)
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    options = {"fallback_execution": True} if how == "option" else None
    if how == "environment":
        monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with pytest.warns(UserWarning, match="Falling back to original GraphModule execution"):
        out = torch.compile(lambda x: x * 4, backend="neuron", options=options)(torch.ones(2, device="neuron"))
    assert out.device.type == "neuron" and out.cpu().tolist() == [4.0, 4.0]


# Another library's ops registered for the device alone (as vLLM registers its attention ops on its platform's
# dispatch key): one functional, one writing into an argument.
_device_only = torch.library.Library("ln_device_only", "DEF")
_device_only.define("scaled(Tensor x) -> Tensor")
_device_only.define("scaled_into(Tensor x, Tensor(a!) out) -> ()")
calls_on_device = []


def _scaled(x):
    calls_on_device.append(x.device.type)
    return x * 3


def _scaled_into(x, out):
    calls_on_device.append(x.device.type)
    out.copy_(x * 3)


_device_only.impl("scaled", _scaled, "PrivateUse1")
_device_only.impl("scaled_into", _scaled_into, "PrivateUse1")
torch.library.register_fake("ln_device_only::scaled", lambda x: torch.empty_like(x), lib=_device_only)
torch.library.register_fake("ln_device_only::scaled_into", lambda x, out: None, lib=_device_only)


def test_device_only_custom_ops_run_eagerly_on_the_device_between_compiled_pieces():
    def f(x):
        y = torch.ops.ln_device_only.scaled(x.sin() + 1)
        out = torch.empty_like(y)
        torch.ops.ln_device_only.scaled_into(y * 2, out)
        return out.cos()

    x = torch.randn(5, 7)
    calls_on_device.clear()
    out = torch.compile(f, backend="neuron")(x.to("neuron"))
    torch.testing.assert_close(out.cpu(), ((x.sin() + 1) * 3 * 2 * 3).cos())
    assert calls_on_device == ["neuron", "neuron"]  # never with host aliases
    (forward,) = graphs()
    assert forward.eager_ops == ["ln_device_only::scaled", "ln_device_only::scaled_into"]
    assert forward.pieces == 3  # compiled code before, between and after the two device-only ops


def test_a_device_only_op_writes_in_place_into_a_fresh_buffer_nothing_else_reads():
    def into_fresh(x):
        out = torch.empty(5, 7, device=x.device)
        torch.ops.ln_device_only.scaled_into(x.sin(), out)
        return out

    def into_shared(x):
        out = torch.zeros(5, 7, device=x.device)
        before = out + 1  # another reader of the buffer: the op writes into a copy
        torch.ops.ln_device_only.scaled_into(x.sin(), out)
        return out * before

    x = torch.randn(5, 7)
    for f, copies in ((into_fresh, False), (into_shared, True)):
        compiled = torch.compile(f, backend="neuron")
        compiled(x.to("neuron"))
        torch_neuronx.clear_op_tracking()
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), x.sin() * 3)
        assert ("aten::clone" in torch_neuronx.get_executed_ops()) == copies, f.__name__
