"""Storage plumbing that used to crash the process or refuse what the CPU or CUDA accept: efficient
zero tensors, tensors whose storage was shrunk, set_ across devices, CPU indices for advanced
indexing, tensor_split's indices from the CPU (as on Trainium), and the advice of nn.TransformerEncoder's nested
fast path.
The crash cases run in a child process, so a regression fails the test instead of the suite."""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn


def run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_efficient_zero_tensors_are_zeros_on_the_device():
    done = run_child("""
        import torch
        z = torch.ops.aten._efficientzerotensor([2, 3], device="neuron")
        assert z._is_zerotensor() and z.device.type == "neuron"
        ones = torch.ones(2, 3, device="neuron")
        assert torch.equal(z.cpu(), torch.zeros(2, 3))
        assert torch.equal((z + 1).cpu(), torch.ones(2, 3))
        assert torch.equal((z * ones).cpu(), torch.zeros(2, 3))
        assert torch.equal(torch.mm(z, torch.ones(3, 4, device="neuron")).cpu(), torch.zeros(2, 4))
        print(float(z.sum()), "ok")
    """)
    assert done.returncode == 0 and done.stdout.split() == ["0.0", "ok"], done.stderr[-3000:]


def test_a_tensor_whose_storage_was_shrunk_raises_instead_of_crashing():
    done = run_child("""
        import torch
        t = torch.ones(4, device="neuron")
        t.untyped_storage().resize_(0)
        for use in (lambda: t.cpu(), lambda: t + 1, lambda: t.sum(), lambda: t.clone(), lambda: t.add_(1),
                    lambda: t[1:].exp()):
            try:
                use()
            except RuntimeError as e:
                print("refused:", e)
    """)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    refusals = done.stdout.splitlines()
    # the view is refused by PyTorch's own bounds check when it is made; the rest by the device
    assert len(refusals) == 6 and all("storage holds 0" in r or "out of bounds for storage of size 0" in r
                                      for r in refusals), done.stdout
    assert "Resize the storage back" in refusals[0]


def test_storage_resized_back_is_usable_again():
    t = torch.arange(4.0, device="neuron")
    storage = t.untyped_storage()
    storage.resize_(0)
    storage.resize_(16)
    t.copy_(torch.tensor([4.0, 3.0, 2.0, 1.0]))
    assert torch.equal(t.cpu(), torch.tensor([4.0, 3.0, 2.0, 1.0]))


def test_set_with_a_storage_of_the_same_device_works_like_cpu():
    for device in ("cpu", "neuron"):
        source = torch.arange(6.0, device=device)
        t = torch.empty(0, device=device).set_(source.untyped_storage(), 1, (2, 2), (2, 1))
        assert torch.equal(t.cpu(), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        source[1] = 10.0
        assert t[0, 0].item() == 10.0  # shares the storage


def test_set_with_a_host_storage_is_refused_as_on_every_device():
    with pytest.raises(RuntimeError, match="must match"):
        torch.empty(0).set_(torch.ones(3, device="neuron").untyped_storage())  # PyTorch's own CPU check
    with pytest.raises(RuntimeError, match=r"source storage is on cpu, expected neuron.*\.to\('neuron'\)"):
        torch.empty(0, device="neuron").set_(torch.ones(3).untyped_storage())


def test_set_without_a_source_empties_the_tensor_on_its_device():
    t = torch.arange(3.0, device="neuron").set_()
    assert t.shape == (0,) and t.untyped_storage().device.type == "neuron"
    t.resize_(4).fill_(2.0)  # grows its own (device) storage
    assert torch.equal(t.cpu(), torch.full((4,), 2.0)) and t.untyped_storage().device.type == "neuron"
    assert torch.ops.aten.set(torch.ones(2, device="neuron")).device.type == "neuron"


def test_lazy_clone_is_an_independent_copy():
    source = torch.arange(4.0, device="neuron")
    clone = source._lazy_clone()
    clone.add_(1)
    assert torch.equal(source.cpu(), torch.arange(4.0)) and torch.equal(clone.cpu(), torch.arange(4.0) + 1)
    assert clone.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()


def test_stack_out_stacks_as_on_cpu():
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    want = torch.ops.aten._stack.out([x, y], 1, out=torch.empty(0))
    got = torch.ops.aten._stack.out([x.to("neuron"), y.to("neuron")], 1, out=torch.empty(0, device="neuron"))
    assert torch.equal(got.cpu(), want) and want.shape == (3, 2, 3)


@pytest.mark.parametrize("accumulate", [False, True])
def test_cpu_indices_index_and_index_put_with_backward(accumulate):
    def run(device):
        x = torch.arange(15.0).reshape(5, 3).to(device).requires_grad_()
        rows = torch.tensor([0, 2, 0])  # CPU indices, as CUDA accepts them
        y = x.index_put((rows,), torch.full((3, 3), 2.0, device=device), accumulate=accumulate)
        z = y[rows] * torch.arange(9.0, device=device).reshape(3, 3)
        z.sum().backward()
        x2 = torch.zeros(5, 3, device=device)
        x2[rows] = 1.0
        return y.detach().cpu(), z.detach().cpu(), x.grad.cpu(), x2.cpu()

    for got, want in zip(run("neuron"), run("cpu"), strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("split", [torch.tensor([2, 5]), torch.tensor(3)])
def test_tensor_split_takes_its_indices_from_the_cpu_as_on_trainium(split):
    """TorchNeuron registers no kernel for tensor_split: PyTorch's composite runs, which wants the indices (or the
    number of sections) as a CPU tensor on every device, CUDA's and Trainium's alike. A device tensor is refused with
    PyTorch's error, not read back behind the user's back; the CPU tensor works and splits the device tensor."""
    x = torch.arange(20.0).reshape(10, 2)
    device_x = x.to("neuron").requires_grad_()
    with pytest.raises(RuntimeError, match="tensor_split expected tensor_indices_or_sections to be on cpu"):
        torch.tensor_split(device_x, split.to("neuron"))
    got, want = torch.tensor_split(device_x, split), torch.tensor_split(x, split)
    assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
    for g, w in zip(got, want, strict=True):
        assert g.device.type == "neuron" and torch.equal(g.detach().cpu(), w)
    sum((g * (i + 1)).sum() for i, g in enumerate(got)).backward()
    weights = torch.cat([torch.full_like(w, i + 1.0) for i, w in enumerate(want)])
    assert torch.equal(device_x.grad.cpu(), weights)


def test_transformer_encoder_fast_path_error_names_the_fix():
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device="neuron")
    x = torch.randn(2, 5, 8)
    encoder = nn.TransformerEncoder(layer, 2).to("neuron").eval()
    with torch.no_grad(), pytest.raises(NotImplementedError, match="enable_nested_tensor=False"):
        encoder(x.to("neuron"), src_key_padding_mask=mask)
    fixed = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    with torch.no_grad():
        want = fixed(x, src_key_padding_mask=mask.cpu())
        got = fixed.to("neuron")(x.to("neuron"), src_key_padding_mask=mask)
    torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-4, equal_nan=True)
