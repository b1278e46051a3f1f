"""The RMSNorm kernel as a PyTorch custom op (nki_op) inside a small model that trains.

The forward runs the NKI kernel on the simulated NeuronCore; register_autograd supplies the
backward (written with torch ops here). The model trains on the `neuron` device when it is
available, eagerly and under torch.compile(backend="neuron").
"""
import torch

from localneuron.nki import kernel_calls, nki_op
from rmsnorm import reference, rmsnorm

EPS = 1e-6


@nki_op("nki_examples::rmsnorm", mutates_args={})
def rmsnorm_op(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return rmsnorm(x, weight, eps=EPS)


def _setup(ctx, inputs, output):
    x, weight = inputs
    ctx.save_for_backward(x, weight)


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    scaled = grad * weight
    grad_x = inv_rms * scaled - x * inv_rms.pow(3) * (scaled * x).mean(-1, keepdim=True)
    grad_weight = (grad * x * inv_rms).sum(0)
    return grad_x, grad_weight


rmsnorm_op.register_autograd(_backward, setup_context=_setup)


class NormedMLP(torch.nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.up = torch.nn.Linear(hidden, hidden)
        self.norm_weight = torch.nn.Parameter(torch.ones(hidden))
        self.down = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        return self.down(rmsnorm_op(torch.relu(self.up(x)), self.norm_weight))


def train(device, compile_backend=None, steps=25, seed=0):
    torch.manual_seed(seed)
    model = NormedMLP().to(device)
    step_fn = torch.compile(model, backend=compile_backend, fullgraph=True) if compile_backend else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 128).to(device)
    target = x[:, :4].sum(-1, keepdim=True).to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(step_fn(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def check_gradients():
    x = torch.randn(64, 128, dtype=torch.float64).float().requires_grad_()
    w = torch.randn(128).requires_grad_()
    out = rmsnorm_op(x, w)
    torch.testing.assert_close(out, reference(x, w), atol=1e-5, rtol=1e-5)
    grads = torch.autograd.grad(out.sum(), (x, w))
    expected = torch.autograd.grad(reference(x, w).sum(), (x, w))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def compile_backend(device):
    if device != "neuron":
        return "aot_eager"
    try:
        torch._dynamo.lookup_backend("neuron")
        return "neuron"
    except Exception as error:  # the example still shows the compiled custom op without it
        print(f"torch.compile backend 'neuron' is unavailable ({error!r}); compiling with aot_eager")
        return "aot_eager"


def main():
    check_gradients()
    device = "neuron" if hasattr(torch, "neuron") and torch.neuron.is_available() else "cpu"
    backend = compile_backend(device)
    for label, backend_name in (("eager", None), (f"compiled ({backend})", backend)):
        losses = train(device, backend_name)
        assert losses[-1] < 0.5 * losses[0], losses
        print(f"rmsnorm_training on {device}, {label}: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    last = kernel_calls()[-1]
    print(f"last kernel call: {last['name']}, estimated {last['estimated_ns'] / 1000:.2f} us, "
          f"bottleneck {last['bottleneck']}")


if __name__ == "__main__":
    main()
