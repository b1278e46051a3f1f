"""AWS's NKI Library kernels inside PyTorch models on the `neuron` device: each kernel registered with
torch_neuronx.nki_op, called on neuron tensors in eager mode and under torch.compile(backend="neuron"), and
compared with the library's own PyTorch reference (`*_torch.py`). A small Llama-style block chains them:
RMSNorm (rmsnorm_tkg) -> query projection (torch) -> RoPE (RoPE kernel).

The library is imported from its tree at run time (shared/third_party/nki-library, or fetch it with the
command localneuron.nki.library_tree.FETCH_COMMAND gives); the tests skip with the reason when it is absent.
"""
import sys

import pytest
import torch

import nki
import torch_neuronx
from localneuron.nki import library_tree

pytest.importorskip("ml_dtypes", reason="the NKI Library's kernels use dtypes beyond numpy's (pip install ml_dtypes)")
ROOT = library_tree.find()
if ROOT is None:
    pytest.skip(f"AWS's NKI Library tree is absent; fetch it with: {library_tree.FETCH_COMMAND}",
                allow_module_level=True)
sys.path.insert(0, str(ROOT / "src"))

from nkilib_src.nkilib.core.embeddings.rope import RoPE  # noqa: E402
from nkilib_src.nkilib.core.embeddings.rope_torch import rope_torch_ref  # noqa: E402
from nkilib_src.nkilib.core.subkernels.rmsnorm_tkg import rmsnorm_tkg  # noqa: E402
from nkilib_src.nkilib.core.subkernels.rmsnorm_torch import rmsnorm_tkg_torch_ref_lnc1  # noqa: E402

if not (hasattr(torch, "neuron") and torch.neuron.is_available()):
    pytest.skip("the simulated neuron device is not available", allow_module_level=True)

RMSNORM = nki.jit(rmsnorm_tkg)   # a subkernel writing its `output` argument; run here as a kernel


@torch_neuronx.nki_op("nki_library::rope", mutates_args={})
def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return RoPE(x, cos, sin)


@torch_neuronx.nki_op("nki_library::rmsnorm_", mutates_args={"out"})
def rmsnorm_(x: torch.Tensor, gamma: torch.Tensor, out: torch.Tensor, eps: float) -> None:
    RMSNORM(x, gamma, out, eps=eps)


def _rmsnorm(x, gamma, eps=1e-6):
    """[B, S, H] -> the kernel's tile layout [128, B*S, H // 128]."""
    b, s, h = x.shape
    out = torch.empty(128, b * s, h // 128, dtype=x.dtype, device=x.device)
    rmsnorm_(x, gamma, out, eps)
    return out


class LlamaQueryBlock(torch.nn.Module):
    """x -> RMSNorm -> q = norm(x) @ Wq -> RoPE(q): the query path of a Llama attention layer."""

    def __init__(self, hidden, heads, d_head):
        super().__init__()
        self.gamma = torch.nn.Parameter(torch.randn(1, hidden) * 0.1 + 1)
        self.wq = torch.nn.Parameter(torch.randn(hidden, heads * d_head) / hidden ** 0.5)
        self.heads, self.d_head = heads, d_head

    def forward(self, x, cos, sin, norm, rotate):
        b, s, h = x.shape
        normed = norm(x, self.gamma)                                   # [128, B*S, H/128]
        flat = normed.permute(1, 2, 0).reshape(b * s, h)               # token-major, hidden index j*128 + p
        q = (flat @ self.wq).reshape(b, s, self.heads, self.d_head)
        return rotate(q.permute(3, 0, 2, 1).contiguous(), cos, sin)    # RoPE layout [d_head, B, heads, S]


def _reference_norm(x, gamma):
    return rmsnorm_tkg_torch_ref_lnc1(input=x, gamma=gamma, output=None)["out"]


def _reference_rope(x, cos, sin):
    return rope_torch_ref(x, cos, sin)["x_out"]


def _inputs(seed=0, b=1, s=4, h=512, heads=2, d_head=64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, s, h, generator=g)
    angles = torch.rand(d_head // 2, b, s, generator=g) * 3.0
    return x, torch.cos(angles), torch.sin(angles), heads, d_head


def test_rope_kernel_on_neuron_tensors_equals_the_library_reference():
    x = torch.randn(64, 2, 3, 8)
    angles = torch.rand(32, 2, 8) * 3.0
    cos, sin = torch.cos(angles), torch.sin(angles)
    got = rope(x.to("neuron"), cos.to("neuron"), sin.to("neuron"))
    assert got.device.type == "neuron" and got.shape == x.shape
    torch.testing.assert_close(got.cpu(), _reference_rope(x, cos, sin), rtol=1e-5, atol=1e-5)


def test_rmsnorm_kernel_writes_its_output_tensor_in_place_like_the_reference():
    x = torch.randn(2, 3, 512)
    gamma = torch.randn(1, 512)
    got = _rmsnorm(x.to("neuron"), gamma.to("neuron"))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), _reference_norm(x, gamma), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_llama_query_block_with_library_kernels_matches_the_torch_references(compiled):
    x, cos, sin, heads, d_head = _inputs()
    torch.manual_seed(0)
    block = LlamaQueryBlock(x.shape[-1], heads, d_head)
    with torch.no_grad():
        expected = block(x, cos, sin, _reference_norm, _reference_rope)
        on_device = LlamaQueryBlock(x.shape[-1], heads, d_head).to("neuron")
        on_device.load_state_dict(block.state_dict())
        run = on_device.forward if not compiled else torch.compile(on_device.forward, backend="neuron")
        got = run(x.to("neuron"), cos.to("neuron"), sin.to("neuron"), _rmsnorm, rope)
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)
