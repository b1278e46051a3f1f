"""Composite ops without a device kernel run their composite code on device tensors.
Those whose code looks up a per-device DispatchStub, checks the device type or calls a CPU kernel
directly (kaiser_window, mode's out= variant, _batch_norm_no_update: run=WHOLE_INCLUDING_OUT in
op_records.py), or reads and writes the tensors' bytes through raw pointers (_saturate_weight_to_fp16,
_grid_sampler_2d_cpu_fallback: run=WHOLE, else they would race the queued work that makes their inputs)
run whole on host aliases; the rest must keep working through their composite code. Each call is compared
with the CPU."""
import pytest
import torch

X = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))


def x(device):
    return X.to(device)


def mode_out(device):
    values, indices = torch.empty(0, device=device), torch.empty(0, dtype=torch.long, device=device)
    torch.mode(x(device), 1, out=(values, indices))
    return values, indices


def amp_unscale(device):
    grads, found_inf = [x(device).clone()], torch.zeros(1, device=device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch.tensor([0.5], device=device))
    return grads[0], found_inf


CALLS = {
    # the device-type kernels, every overload
    "kaiser_window": lambda d: torch.kaiser_window(8, device=d),
    "kaiser_window.periodic": lambda d: torch.kaiser_window(8, False, device=d),
    "kaiser_window.beta": lambda d: torch.kaiser_window(9, True, 5.0, dtype=torch.bfloat16, device=d),
    "kaiser_window.out": lambda d: torch.ops.aten.kaiser_window.out(8, out=torch.empty(8, device=d)),
    "mode": lambda d: torch.mode(x(d), 0),
    "mode.values": mode_out,
    "_batch_norm_no_update": lambda d: torch.ops.aten._batch_norm_no_update(
        x(d), None, None, torch.zeros(5, device=d), torch.ones(5, device=d), 0.1, 1e-5),
    # composite kernels that reach the device through other ops
    "hann_window": lambda d: torch.hann_window(8, device=d),
    "hamming_window.periodic_alpha_beta": lambda d: torch.hamming_window(8, True, 0.5, 0.4, device=d),
    "blackman_window": lambda d: torch.blackman_window(8, device=d),
    "bartlett_window": lambda d: torch.bartlett_window(8, device=d),
    "median.dim": lambda d: torch.median(x(d), 1),
    "nanmedian.dim": lambda d: torch.nanmedian(x(d), 1),
    "kthvalue": lambda d: torch.kthvalue(x(d), 2, 1),
    "logcumsumexp": lambda d: torch.logcumsumexp(x(d), 1),
    "cummax": lambda d: torch.cummax(x(d), 1),
    "polar": lambda d: torch.polar(x(d).abs(), x(d)),
    "mvlgamma": lambda d: torch.mvlgamma(x(d).abs() + 2, 2),
    "count_nonzero": lambda d: torch.count_nonzero(x(d) > 0, 1),
    "chebyshev_polynomial_t.n_scalar": lambda d: torch.special.chebyshev_polynomial_t(x(d), 3),
    "xlogy.Scalar_Self": lambda d: torch.xlogy(2.0, x(d).abs()),
    "fft_fftfreq": lambda d: torch.fft.fftfreq(8, device=d),
    "linspace.Tensor_Tensor": lambda d: torch.linspace(torch.tensor(0.0, device=d), torch.tensor(1.0, device=d), 5,
                                                           device=d),
    "_chunk_cat": lambda d: torch._chunk_cat([x(d), x(d)], 1, 2),
    "block_diag": lambda d: torch.block_diag(x(d), x(d)),
    "masked_scatter": lambda d: x(d).masked_scatter(x(d) > 0, torch.ones(20, device=d)),
    "_amp_foreach_non_finite_check_and_unscale_": amp_unscale,
    "histogram": lambda d: torch.histogram(x(d), 4),
    "stft": lambda d: torch.stft(torch.ones(64, device=d), 16, return_complex=True, window=torch.ones(16, device=d)),
    "segment_reduce": lambda d: torch.segment_reduce(torch.arange(6.0, device=d), "sum",
                                                     lengths=torch.tensor([2, 4], device=d)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_runs_on_neuron_like_on_cpu(name):
    want, got = CALLS[name]("cpu"), CALLS[name]("neuron")
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        assert g.device.type == "neuron" and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, atol=0, rtol=0)


def _grid(device):
    g = torch.rand(1, 3, 3, 2, generator=torch.Generator().manual_seed(1)) * 2.4 - 1.2
    g[0, 0] = torch.tensor([[float("nan"), 0.1], [float("inf"), 0.2], [-float("inf"), -1e30]])
    return g.to(device)


def _pending(make, device):
    """`make(device)`, issued behind queued work: on `neuron` its inputs are made by queued ops that have not run
    when the op under test is issued (a kernel reading raw bytes would see them unwritten)."""
    if device == "neuron":
        busy = torch.randn(256, 256, device=device)
        for _ in range(8):
            busy = busy @ busy.tanh()
    return make(device)


RAW_BYTE_CALLS = {
    "_saturate_weight_to_fp16": lambda d: torch.ops.aten._saturate_weight_to_fp16(
        X.to(d) * torch.tensor([1e5, 1.0, -1e5, 7e4, float("inf")], device=d)),
    "_grid_sampler_2d_cpu_fallback": lambda d: torch.ops.aten._grid_sampler_2d_cpu_fallback(
        X.to(d).reshape(1, 1, 4, 5) * 2, _grid(d), 0, 0, False),
    "_grid_sampler_2d_cpu_fallback.out": lambda d: torch.ops.aten._grid_sampler_2d_cpu_fallback.out(
        X.to(d).reshape(1, 1, 4, 5) * 2, _grid(d), 1, 1, True, out=torch.empty(0, device=d)),
    "_grid_sampler_2d_cpu_fallback_backward": lambda d: torch.ops.aten._grid_sampler_2d_cpu_fallback_backward(
        torch.ones(1, 1, 3, 3, device=d) * 3, X.to(d).reshape(1, 1, 4, 5) * 2, _grid(d), 0, 0, False),
}


@pytest.mark.parametrize("name", sorted(RAW_BYTE_CALLS))
def test_raw_byte_composites_see_their_inputs_as_queued_work_leaves_them(quiet, name):
    for _ in range(4):  # the first call of a signature runs at once; later calls are queued
        want = RAW_BYTE_CALLS[name]("cpu")
        got = _pending(RAW_BYTE_CALLS[name], "neuron")
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want, strict=True):
            assert g.device.type == "neuron" and g.dtype == w.dtype and g.stride() == w.stride()
            torch.testing.assert_close(g.cpu(), w, atol=0, rtol=0, equal_nan=True)
