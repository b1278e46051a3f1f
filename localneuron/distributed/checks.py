"""What a collective's tensors must satisfy before they reach the transport.

Gloo reads and writes most operands as flat memory: a strided view there is silently wrong (an
all_reduce of a column sums the wrong elements), and ranks that pass different shapes abort the
process inside Gloo ("Received data size doesn't match expected size"). So, before the transport:
- every tensor is on one device type (Trainium's collectives move device memory only);
- every tensor is contiguous, except the per-rank lists c10d copies through a flat buffer itself;
- the tensors of a call share one dtype (for *_coalesced calls: each output with its input);
- with TORCH_DISTRIBUTED_DEBUG=DETAIL, the ranks agree on the call's shapes and dtypes (one extra
  all_gather of a fingerprint per collective); otherwise a shape mismatch is Gloo's abort, as above.
A check that fails on some ranks only (a strided scatter list on the root) leaves the others waiting
for the group's timeout, like any rank that skips a collective.
"""
import hashlib

import torch

# Per-rank lists that c10d copies into or out of a flat buffer, so strided views work there.
COPIED_OPERANDS = {
    "all_gather": "outputs",
    "gather": "outputs",
    "reduce_scatter": "inputs",
}

# The side of a call whose shapes every rank must pass alike; calls not listed have per-rank shapes
# by design (point-to-point, all_to_all lists) or no tensors (barrier).
SHAPES_AGREE_ON = {
    "all_reduce": "inputs",
    "all_reduce_coalesced": "inputs",
    "reduce": "inputs",
    "broadcast": "inputs",
    "all_gather": "both",
    "all_gather_coalesced": "both",
    "all_gather_into_tensor": "both",
    "all_gather_into_tensor_coalesced": "both",
    "reduce_scatter": "both",
    "reduce_scatter_tensor": "both",
    "reduce_scatter_tensor_coalesced": "both",
    "all_to_all_single": "both",
    "gather": "inputs",
    "scatter": "outputs",
}


def flat(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for y in x for t in flat(y)]


def check_call(kind: str, outputs, inputs) -> None:
    """Raises ValueError, naming the collective, for tensors the transport would mishandle."""
    flat_outputs, flat_inputs = flat(outputs), flat(inputs)
    tensors = flat_outputs + flat_inputs
    types = {t.device.type for t in tensors}
    if len(types) > 1:
        raise ValueError(f"{kind}: all tensors of one collective must be on the same device type, got {sorted(types)}")
    copied = {"outputs": flat_outputs, "inputs": flat_inputs}.get(COPIED_OPERANDS.get(kind), [])
    for t in tensors:
        if not t.is_contiguous() and not any(t is c for c in copied):
            raise ValueError(f"{kind}: Tensors must be contiguous (got a {_describe(t)} view with strides "
                             f"{t.stride()}); pass t.contiguous() and copy the result back if the view is an output.")
    pairs = zip(flat_outputs, flat_inputs) if kind.endswith("_coalesced") else [tensors]
    for group in pairs:
        dtypes = {t.dtype for t in group}
        if len(dtypes) > 1:
            names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
            raise ValueError(f"{kind}: the tensors of one collective must share one dtype, got {names}; convert them "
                             "with .to(dtype) first.")


def check_ranks_agree(gloo, kind: str, outputs, inputs, where: str) -> None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: every rank must pass the same shapes and dtypes, or every rank
    raises here instead of Gloo aborting the process."""
    side = SHAPES_AGREE_ON.get(kind)
    if side is None:
        return
    tensors = flat(inputs) if side == "inputs" else flat(outputs) if side == "outputs" else flat(outputs) + flat(inputs)
    signature = f"{kind}: " + ", ".join(_describe(t) for t in tensors)
    fingerprint = torch.tensor([int.from_bytes(hashlib.sha256(signature.encode()).digest()[:7], "little")])
    gathered = [torch.zeros_like(fingerprint) for _ in range(gloo.size())]
    gloo.allgather([gathered], [fingerprint]).wait()
    differing = [r for r, f in enumerate(gathered) if not torch.equal(f, fingerprint)]
    if differing:
        raise ValueError(f"{where}: {kind} was called with different shapes or dtypes on ranks {differing} than on "
                         f"this rank ({signature}); every rank must pass the same (TORCH_DISTRIBUTED_DEBUG=DETAIL "
                         "check).")


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
