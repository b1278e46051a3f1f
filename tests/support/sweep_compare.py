"""How the sweeps move a call to `neuron` and compare its results with the CPU's (shared by
tests/support/opinfo_sweep.py and tests/support/dispatcher_sweep.py).

Tolerances: assert_close's float32 defaults (1.3e-6 / 1e-5) apply except for ops whose results
legitimately depend on accumulation order or on the LAPACK/BLAS/FFT path taken (reductions, matrix
products, decompositions, transforms), which get FLOAT32_LOOSE. Measured on the simulated device (host
kernels), no op needs the loose values yet: they are headroom for device kernels that accumulate in
another order, still tight enough to catch wrong results. Low-precision outputs outside their tolerance
still match when they are as accurate as CPU's against a float32 reference (see close_to_reference).
"""
import torch

FLOAT32_LOOSE = (1e-4, 1e-4)
LOW_PRECISION_TOL = {"bfloat16": (1e-2, 1e-2), "float16": (1e-3, 1e-3)}
# OpInfo names ("linalg.svd") and ATen names ("linalg_svd", "_fft_r2c") alike.
LOOSE_PREFIXES = ("linalg.", "linalg_", "_linalg", "nn.functional.conv", "conv", "_conv", "nn.functional.linear",
                  "nn.functional.bilinear", "fft.", "fft_", "_fft", "_native_batch_norm", "native_batch_norm",
                  "_batch_norm", "batch_norm")
LOOSE_NAMES = {
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "addr", "mv", "dot", "vdot", "inner",
    "outer", "einsum", "tensordot", "chain_matmul", "kron", "cdist", "pdist", "cholesky", "cholesky_solve",
    "cholesky_inverse", "lu", "lu_solve", "lu_unpack", "triangular_solve", "pinverse", "inverse", "det",
    "logdet", "slogdet", "svd", "svd_lowrank", "pca_lowrank", "qr", "geqrf", "ormqr",
    "matrix_exp", "trace", "std", "var", "std_mean", "var_mean", "sum", "nansum", "mean", "nanmean",
    "prod", "cumsum", "cumprod", "logcumsumexp", "logsumexp", "norm", "renorm", "dist", "trapz",
    "trapezoid", "cumulative_trapezoid", "softmax", "log_softmax", "_softmax_backward_data",
    "nn.functional.layer_norm", "nn.functional.group_norm", "nn.functional.instance_norm",
    "nn.functional.batch_norm", "nn.functional.rms_norm", "nn.functional.local_response_norm",
    "nn.functional.normalize", "nn.functional.cosine_similarity", "nn.functional.pairwise_distance",
    "nn.functional.scaled_dot_product_attention", "nn.functional.multi_head_attention_forward",
    "stft", "istft", "corrcoef", "cov",
    # ATen spellings of the same families
    "linear", "bilinear", "layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "instance_norm",
    "rms_norm", "_fused_rms_norm", "local_response_norm", "cosine_similarity", "pairwise_distance",
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_softmax", "_log_softmax",
    "_log_softmax_backward_data", "frobenius_norm", "nuclear_norm", "_cdist_forward", "_pdist_forward",
    "_euclidean_dist", "native_layer_norm_backward", "native_group_norm_backward", "_weight_norm",
    "_weight_norm_interface", "cosine_embedding_loss", "_addmm_activation", "_int_mm",
}


def tolerance(name: str, dtype_name: str, reduction: bool = False):
    """(rtol, atol) for an op's floating outputs, or None for assert_close's defaults."""
    if dtype_name in LOW_PRECISION_TOL:
        return LOW_PRECISION_TOL[dtype_name]
    if reduction or name in LOOSE_NAMES or name.startswith(LOOSE_PREFIXES):
        return FLOAT32_LOOSE
    return None


def to_neuron(obj):
    if isinstance(obj, torch.Tensor):
        # A copy (the CPU run may modify the original in place) with the same storage layout: views keep
        # their strides, storage offset and the rest of their storage (as_strided reads it).
        t = obj.detach()
        if t.layout != torch.strided:  # sparse and other layouts: however the device takes them
            return t.to("neuron")
        if t._is_view() or t.storage_offset() != 0 or not t.is_contiguous():
            n = t.untyped_storage().nbytes() // t.element_size()
            storage = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
            return storage.clone().to("neuron").as_strided(t.size(), t.stride(), t.storage_offset())
        return t.clone().to("neuron")
    if isinstance(obj, torch.device) and obj.type == "cpu":
        return torch.device("neuron")
    if isinstance(obj, str) and obj == "cpu":
        return "neuron"
    if isinstance(obj, list):
        return [to_neuron(x) for x in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(to_neuron(x) for x in obj)
    if isinstance(obj, dict):
        return {k: to_neuron(v) for k, v in obj.items()}
    return obj


def clone(obj):
    """A copy of a call's arguments (tensors cloned with their layout, containers rebuilt)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.layout == torch.strided and (t._is_view() or t.storage_offset() != 0 or not t.is_contiguous()):
            n = t.untyped_storage().nbytes() // t.element_size()
            storage = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
            return storage.clone().as_strided(t.size(), t.stride(), t.storage_offset())
        return t.clone()
    if isinstance(obj, list):
        return [clone(x) for x in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(clone(x) for x in obj)
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    return obj


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in flatten(o)]
    if isinstance(out, dict):
        return [x for k in sorted(out) for x in flatten(out[k])]
    return [out]


def upcast(obj):
    """obj with its low-precision float tensors as float32 copies: inputs of the float32 reference."""
    if isinstance(obj, torch.Tensor):
        low = obj.dtype in (torch.bfloat16, torch.float16)
        return obj.detach().to(torch.float32) if low else obj.detach().clone()
    if isinstance(obj, list):
        return [upcast(x) for x in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(upcast(x) for x in obj)
    if isinstance(obj, dict):
        return {k: upcast(v) for k, v in obj.items()}
    return obj


def _rmse(a, b) -> float:
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def close_to_reference(c, d, ref, atol: float) -> bool:
    """Low-precision rescue, as torch._dynamo.utils.same does for low-precision backends: the neuron result
    is accepted when its RMSE against a float32 reference (same inputs, upcast) is at most twice the CPU
    low-precision result's RMSE against it (dynamo allows 3x) plus atol/10. An op decomposed differently
    from CPU's fused kernel rounds at other places, so low-precision results can differ from CPU's by
    more than the tolerance while being just as accurate."""
    if not isinstance(ref, torch.Tensor) or ref.shape != c.shape or not ref.is_floating_point():
        return False
    ref = ref.detach().to("cpu")
    finite = torch.isfinite(ref) & torch.isfinite(c.float())
    if not torch.equal(torch.isfinite(d.float()) & finite, finite) or not finite.any():
        return False
    cpu_err, dev_err = _rmse(c[finite], ref[finite]), _rmse(d[finite], ref[finite])
    return dev_err <= 2.0 * cpu_err + atol / 10


def compare(cpu_out, dev_out, tol=None, values=True, ref_out=None, on_device=True, shape_only=()) -> list[str]:
    """Raise AssertionError describing the first difference between the CPU's and neuron's results (dtype,
    shape, device; values unless values=False or the leaf index is in shape_only). tol: (rtol, atol) for
    floating outputs or None for assert_close's defaults. on_device=False: results that stay on the CPU
    on every device. Returns notes (outputs matched by the float32 reference)."""
    notes = []
    cpu_leaves, dev_leaves = flatten(cpu_out), flatten(dev_out)
    ref_leaves = flatten(ref_out) if ref_out is not None else []
    if len(ref_leaves) != len(cpu_leaves):
        ref_leaves = [None] * len(cpu_leaves)
    if len(cpu_leaves) != len(dev_leaves):
        raise AssertionError(f"output structure differs: {len(cpu_leaves)} vs {len(dev_leaves)} leaves")
    for i, (c, d) in enumerate(zip(cpu_leaves, dev_leaves)):
        if isinstance(c, torch.Tensor):
            if not isinstance(d, torch.Tensor):
                raise AssertionError(f"output {i}: neuron returned {type(d).__name__}, CPU a tensor")
            if on_device and c.device.type == "cpu" and d.device.type != "neuron":
                raise AssertionError(f"output {i}: on {d.device} instead of neuron")
            if c.is_nested or c.layout != torch.strided:
                raise AssertionError(f"output {i}: a {'nested' if c.is_nested else c.layout} CPU result; neuron "
                                     f"returned a {'nested' if d.is_nested else d.layout} tensor instead of refusing it")
            if c.shape != d.shape or c.dtype != d.dtype:
                raise AssertionError(f"output {i}: neuron {d.dtype}{list(d.shape)} vs CPU {c.dtype}{list(c.shape)}")
            if not values or i in shape_only:
                continue
            d = d.detach().to("cpu")
            floating = c.is_floating_point() or c.is_complex()
            kw = {} if tol is None or not floating else {"rtol": tol[0], "atol": tol[1]}
            try:
                torch.testing.assert_close(d, c.detach(), equal_nan=True, check_stride=False, **kw)
            except AssertionError as e:
                if c.dtype in (torch.bfloat16, torch.float16) and close_to_reference(
                        c, d, ref_leaves[i], LOW_PRECISION_TOL[str(c.dtype).split(".")[1]][1]):
                    notes.append(f"output {i} matched by float32-reference RMSE")
                    continue
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                raise AssertionError(f"output {i}: " + "; ".join(lines[:3])) from None
        elif isinstance(c, float) and isinstance(d, float):
            if values and not (abs(c - d) <= 1e-5 + 1e-5 * abs(c) or (c != c and d != d)):
                raise AssertionError(f"output {i}: {d} vs CPU {c}")
        elif values and c != d:
            raise AssertionError(f"output {i}: {d!r} vs CPU {c!r}")
    return notes
