"""Data types: the 16/32-bit, integer, bool and complex families work; 64-bit computes in 32 bits."""
import warnings

import pytest
import torch

from fresh_python import run_python


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.int16,
                                   torch.int32, torch.uint8, torch.bool, torch.complex64])
def test_common_ops_match_cpu(dtype):
    a = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    b = (torch.arange(12).reshape(3, 4) % 3 + 1).to(dtype)
    na, nb = a.neuron(), b.neuron()
    ops = [lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x == y, lambda x, y: torch.cat([x, y]),
           lambda x, y: x.t().contiguous()]
    if not dtype.is_complex:
        ops.append(lambda x, y: torch.maximum(x, y))
    if dtype.is_floating_point or dtype.is_complex:
        ops += [lambda x, y: x / y, lambda x, y: x @ y.t(), lambda x, y: x.sum(1)]
    if dtype == torch.bool:
        ops = [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: ~x, lambda x, y: x.any(1)]
    for op in ops:
        out = op(na, nb)
        assert out.device.type == "neuron" and out.dtype == op(a, b).dtype
        torch.testing.assert_close(out.cpu(), op(a, b))


def test_float64_keeps_its_dtype_but_computes_like_float32():
    torch.manual_seed(0)
    a, b = torch.randn(64, 64, dtype=torch.float64), torch.randn(64, 64, dtype=torch.float64)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = a.neuron() @ b.neuron()
        summed = a.neuron().sum()
    assert out.dtype == torch.float64 and out.device.type == "neuron"
    expected = (a.float() @ b.float()).double()
    assert torch.equal(out.cpu(), expected)  # exactly the 32-bit computation, not the 64-bit one
    assert not torch.equal(out.cpu(), a @ b)
    assert summed.item() == a.float().sum().item()
    x = torch.tensor([1.0 + 1e-12], dtype=torch.float64).neuron()
    x.add_(0)  # in place: the value is narrowed to float32 like on the device
    assert x.dtype == torch.float64 and x.item() == 1.0


def test_int64_wraps_around_like_int32():
    big = torch.tensor([2**31 - 1, 5], dtype=torch.int64)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = big.neuron() + 1
    assert out.dtype == torch.int64
    assert out.cpu().tolist() == [-(2**31), 6]
    assert (big + 1).tolist() == [2**31, 6]  # the host keeps 64 bits
    grid = torch.tensor([[2**31 - 1, -(2**31)], [2**31 - 2, 3]], dtype=torch.int64)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        transposed = grid.neuron().t() * 3  # a non-contiguous result
    assert not transposed.is_contiguous()
    assert torch.equal(transposed.cpu(), (grid.t().int() * 3).long())


def test_64bit_warnings_are_given_once_per_dtype():
    code = ("import warnings, torch\n"
            "warnings.simplefilter('always')\n"
            "x = torch.ones(3, dtype=torch.float64).to('neuron')\n"
            "for _ in range(3):\n    x = x * 2\n"
            "i = torch.ones(3, dtype=torch.int64).to('neuron')\n"
            "for _ in range(3):\n    i = i + 1\n"
            "print(x.sum().item(), i.sum().item())\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["24.0", "12"]
    assert r.stderr.count("float64 tensors are computed in float32 on Neuron") == 1
    assert r.stderr.count("int64 tensors are computed in int32 on Neuron") == 1


def test_64bit_warning_skips_tensor_printing_but_not_the_same_op_called_after():
    code = ("import warnings, torch\n"
            "x = torch.tensor([1.5, -2.25, 3.0], dtype=torch.float64).to('neuron')\n"
            "with warnings.catch_warnings(record=True) as printing:\n"
            "    warnings.simplefilter('always')\n"
            "    print(x)  # computes abs() of the float64 values, among others\n"
            "with warnings.catch_warnings(record=True) as user:\n"
            "    warnings.simplefilter('always')\n"
            "    x.abs()\n"
            "print([len([w for w in caught if 'float64 tensors' in str(w.message)]) for caught in (printing, user)])\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "[0, 1]"


def test_int64_indices_run_directly():
    emb = torch.nn.Embedding(10, 4)
    idx = torch.tensor([[1, 2], [9, 0]])
    expected = emb(idx)
    torch.testing.assert_close(emb.to("neuron")(idx.neuron()).cpu(), expected)


def test_complex_arithmetic():
    z = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    n = z.neuron()
    torch.testing.assert_close((n * n.conj()).cpu(), z * z.conj())
    torch.testing.assert_close(n.abs().cpu(), z.abs())
