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


# float64 special functions where float32's range shows (docs/limitations.md): (name, call on a tensor or a dtype).
FLOAT64_RANGE_CASES = {
    "i0 past 88": lambda d, dtype: torch.i0(torch.tensor([0.5, 100.0, -100.0, 1e30], dtype=dtype, device=d)),
    "special.i1 past 88": lambda d, dtype: torch.special.i1(torch.tensor([2.0, 100.0, -1e30], dtype=dtype, device=d)),
    "polygamma near a pole": lambda d, dtype: torch.polygamma(
        2, torch.tensor([1e-30, -100.000001, 1.5, 1e30], dtype=dtype, device=d)),
    "kaiser_window, large beta": lambda d, dtype: torch.kaiser_window(5, True, 100.0, dtype=dtype, device=d),
    "kaiser_window, beta 1000, out=": lambda d, dtype: torch.ops.aten.kaiser_window.beta_out(
        7, True, 1000.0, out=torch.empty(0, dtype=dtype, device=d)),
    "shifted Chebyshev T, large x": lambda d, dtype: torch.special.shifted_chebyshev_polynomial_t(
        torch.tensor([1e10, -1e10, 0.3], dtype=dtype, device=d), 7),
    "Laguerre L, out=": lambda d, dtype: torch.special.laguerre_polynomial_l(
        torch.tensor([1e30, -50.0, 0.3], dtype=dtype, device=d), torch.tensor([9.0, 30.0, 2.0], dtype=dtype, device=d),
        out=torch.empty(0, dtype=dtype, device=d)),
}


@pytest.mark.parametrize("case", FLOAT64_RANGE_CASES)
def test_float64_special_functions_have_float32_range(quiet, case):
    call = FLOAT64_RANGE_CASES[case]
    got = call("neuron", torch.float64)
    assert got.dtype == torch.float64
    as_float32 = call("cpu", torch.float32).double()
    torch.testing.assert_close(got.cpu(), as_float32, rtol=0, atol=0, equal_nan=True)
    # the documented divergence: the CPU's float64 keeps values float32 cannot hold
    with pytest.raises(AssertionError):
        torch.testing.assert_close(got.cpu(), call("cpu", torch.float64), rtol=1e-5, atol=0, equal_nan=True)


def test_float64_gradcheck_fails_as_float32_finite_differences_do(quiet):
    # gradcheck's finite differences (eps 1e-6) need float64 precision: vander's backward is right on the device
    # (as float32's), but its float64 gradcheck fails there, as it fails on the CPU in float32.
    x = torch.tensor([0.5, -1.25, 2.0], dtype=torch.float64)
    vander = lambda t: torch.linalg.vander(t, N=4)  # noqa: E731
    assert torch.autograd.gradcheck(vander, (x.clone().requires_grad_(),))
    assert not torch.autograd.gradcheck(vander, (x.to("neuron").requires_grad_(),), raise_exception=False)
    assert not torch.autograd.gradcheck(vander, (x.float().requires_grad_(),), raise_exception=False, atol=1e-5)
    xs = x.to("neuron").requires_grad_()
    vander(xs).sum().backward()
    xf = x.float().requires_grad_()
    vander(xf).sum().backward()
    torch.testing.assert_close(xs.grad.cpu(), xf.grad.double(), rtol=0, atol=0)


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
