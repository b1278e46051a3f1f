"""Random numbers on neuron follow TorchNeuron's rule (localneuron/device/random.py): every draw, eager or in a
compiled graph, in either execution mode, consumes the CPU's default generator exactly as the same op on the CPU
would, while torch.neuron's per-device generators hold a 16-byte Philox state that no draw touches."""
import struct

import pytest
import torch
import torch.nn.functional as F

from fresh_python import run_python

SEED = 1234


def _zeros(device, dtype=torch.float32):
    return torch.zeros(5, 7, dtype=dtype, device=device)


def _probabilities(device):
    return torch.linspace(0.05, 0.95, 40).to(device)


DRAWS = {  # name -> draw(device): sizes above 16 take the CPU's vectorised paths too
    "randn": lambda d: torch.randn(6, 7, device=d),
    "rand": lambda d: torch.rand(33, device=d),
    "randint": lambda d: torch.randint(0, 10, (40,), device=d),
    "randperm": lambda d: torch.randperm(25, device=d),
    "normal": lambda d: torch.normal(2.0, 3.0, (30,), device=d),
    "normal_tensor_mean": lambda d: torch.normal(torch.arange(20.0).to(d), 1.0),
    "randn_like": lambda d: torch.randn_like(_zeros(d)),
    "rand_like_bfloat16": lambda d: torch.rand_like(_zeros(d, torch.bfloat16)),
    "randint_like": lambda d: torch.randint_like(_zeros(d), 0, 100),
    "normal_": lambda d: _zeros(d).normal_(1.0, 2.0),
    "uniform_": lambda d: _zeros(d).uniform_(-1.0, 1.0),
    "bernoulli_": lambda d: _zeros(d).bernoulli_(0.3),
    "bernoulli": lambda d: torch.bernoulli(_probabilities(d)),
    "exponential_": lambda d: _zeros(d).exponential_(),
    "random_": lambda d: _zeros(d).random_(0, 5),
    "multinomial": lambda d: torch.multinomial(_probabilities(d), 8),
    "poisson": lambda d: torch.poisson(_probabilities(d) * 4),
    "native_dropout": lambda d: torch.native_dropout(torch.ones(6, 9, device=d), 0.4, True),
    "functional_dropout": lambda d: F.dropout(torch.ones(50, device=d), 0.5, True),
    "module_dropout": lambda d: torch.nn.Dropout(0.25).train()(torch.ones(4, 8, device=d)),
}


def _on_cpu(result):
    return tuple(_on_cpu(r) for r in result) if isinstance(result, tuple) else result.cpu()


def _draw_then_next_cpu_values(draw, device):
    """What `draw` gives after torch.manual_seed, and what the CPU's generator gives next."""
    torch.manual_seed(SEED)
    drawn = _on_cpu(draw(device))
    return drawn, torch.rand(8)


@pytest.mark.parametrize("name", DRAWS)
def test_each_draw_gives_the_cpu_values_and_advances_the_cpu_stream_alike(name, quiet):
    on_device, next_after_device = _draw_then_next_cpu_values(DRAWS[name], "neuron")
    on_cpu, next_after_cpu = _draw_then_next_cpu_values(DRAWS[name], "cpu")
    torch.testing.assert_close(on_device, on_cpu, rtol=0, atol=0)
    assert torch.equal(next_after_device, next_after_cpu)


def test_draws_interleaved_with_queued_ops_come_in_program_order(quiet):
    def run(device):
        torch.manual_seed(SEED)
        x = torch.ones(64, device=device)
        for _ in range(5):  # queued arithmetic between the draws (asynchronous mode)
            x = x * 1.5 + torch.randn_like(x)
            x = F.dropout(x, 0.3, True).relu() + torch.rand(64, device=device)
        return x.cpu()

    torch.testing.assert_close(run("neuron"), run("cpu"))


def test_cpu_generator_arguments_are_drawn_from_as_on_the_cpu(quiet):
    def run(device):
        torch.manual_seed(SEED)
        generator = torch.Generator().manual_seed(7)
        drawn = [torch.randn(20, device=device, generator=generator),
                 torch.poisson(torch.full((20,), 3.0, device=device), generator),  # a positional generator
                 torch.zeros(20, device=device).uniform_(generator=generator)]
        return [t.cpu() for t in drawn], generator.get_state(), torch.rand(4)

    (device_draws, device_generator, device_next), (cpu_draws, cpu_generator, cpu_next) = run("neuron"), run("cpu")
    for on_device, on_cpu in zip(device_draws, cpu_draws):
        assert torch.equal(on_device, on_cpu)
    assert torch.equal(device_generator, cpu_generator) and torch.equal(device_next, cpu_next)


def test_a_neuron_generator_is_not_available():
    with pytest.raises(RuntimeError, match=r"torch.Generator\(device=\"neuron\"\) is not available.*CPU generator"):
        torch.Generator(device="neuron")


def _sampling_model(x):
    return F.dropout(x * 2, 0.4, True) + torch.randn_like(x) + torch.rand(x.shape, device=x.device)


def test_compiled_graphs_draw_what_eager_draws_on_the_cpu(quiet):
    compiled = torch.compile(_sampling_model, backend="neuron")
    x = torch.arange(48.0).reshape(6, 8)
    torch.manual_seed(SEED)
    first, second = compiled(x.neuron()).cpu(), compiled(x.neuron()).cpu()
    next_after_device = torch.rand(8)
    torch.manual_seed(SEED)
    assert torch.equal(first, _sampling_model(x)) and torch.equal(second, _sampling_model(x))
    assert torch.equal(next_after_device, torch.rand(8))


def test_compiled_dropout_backward_uses_the_forward_mask(quiet):
    def loss_of(layer, x):
        return (layer(x) * torch.arange(float(x.numel())).reshape(x.shape).to(x.device)).sum()

    cpu_layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    device_layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    device_layer.load_state_dict(cpu_layer.state_dict())
    device_layer.neuron()
    x = torch.randn(4, 8)
    torch.manual_seed(SEED)
    loss_of(torch.compile(device_layer, backend="neuron"), x.neuron()).backward()
    torch.manual_seed(SEED)
    loss_of(cpu_layer, x).backward()
    torch.testing.assert_close(device_layer[0].weight.grad.cpu(), cpu_layer[0].weight.grad)


def test_values_do_not_depend_on_the_execution_mode():
    code = ("import torch, torch.nn.functional as F\n"
            "torch.manual_seed(3)\n"
            "x = torch.ones(256, device='neuron')\n"
            "for _ in range(4):\n"
            "    x = F.dropout(x * 1.25 + torch.randn_like(x), 0.2, True)\n"
            "print(x.cpu().sum().item(), torch.rand(1).item())\n")
    printed = {mode: run_python(code, env={"NEURON_LAUNCH_BLOCKING": mode}) for mode in ("0", "1")}
    for result in printed.values():
        assert result.returncode == 0, result.stderr
    torch.manual_seed(3)
    x = torch.ones(256)
    for _ in range(4):
        x = F.dropout(x * 1.25 + torch.randn_like(x), 0.2, True)
    expected = f"{x.sum().item()} {torch.rand(1).item()}"
    assert printed["0"].stdout.strip() == printed["1"].stdout.strip() == expected


# -- torch.neuron's generators --


def _seed_and_offset(state: torch.Tensor) -> tuple[int, int]:
    return struct.unpack("=QQ", bytes(state.tolist()))


def test_rng_state_is_sixteen_bytes_of_philox_seed_and_offset():
    torch.neuron.manual_seed(42)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,) and state.device.type == "cpu"
    assert _seed_and_offset(state) == (42, 0)
    assert torch.equal(torch.neuron.get_rng_state("neuron:0"), state)


def test_manual_seed_seed_and_initial_seed():
    torch.neuron.manual_seed(12345)
    assert torch.neuron.initial_seed() == 12345
    torch.manual_seed(2)  # seeds the CPU and every neuron device
    assert [_seed_and_offset(s)[0] for s in torch.neuron.get_rng_state_all()] == [2] * torch.neuron.device_count()
    torch.neuron.manual_seed_all(77)
    assert {_seed_and_offset(s)[0] for s in torch.neuron.get_rng_state_all()} == {77}
    torch.neuron.seed()
    assert torch.neuron.initial_seed() not in (77, 2)
    torch.neuron.seed_all()
    assert len({_seed_and_offset(s)[0] for s in torch.neuron.get_rng_state_all()}) == 1
    with torch.neuron.device(1):
        torch.neuron.manual_seed(5)
        assert torch.neuron.initial_seed() == 5
    assert torch.neuron.initial_seed() != 5


def test_set_rng_state_round_trips():
    torch.neuron.manual_seed(42)
    state = torch.neuron.get_rng_state()
    torch.neuron.manual_seed(100)
    torch.neuron.set_rng_state(state)
    assert torch.neuron.initial_seed() == 42 and torch.equal(torch.neuron.get_rng_state(), state)
    offset_state = torch.tensor(list(struct.pack("=QQ", 9, 64)), dtype=torch.uint8)
    torch.neuron.set_rng_state(offset_state, 2)
    assert torch.equal(torch.neuron.get_rng_state(2), offset_state)
    saved = torch.neuron.get_rng_state_all()
    torch.neuron.manual_seed_all(0)
    torch.neuron.set_rng_state_all(saved)
    assert all(torch.equal(a, b) for a, b in zip(torch.neuron.get_rng_state_all(), saved))
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        torch.neuron.manual_seed(8)
    assert torch.equal(torch.neuron.get_rng_state(), state)


def test_set_rng_state_refuses_what_get_rng_state_does_not_return():
    with pytest.raises(RuntimeError, match="torch.uint8 tensor of 16 bytes"):
        torch.neuron.set_rng_state(torch.get_rng_state())  # the CPU's Mersenne Twister state


def test_neuron_generators_and_cpu_generator_are_independent(quiet):
    torch.manual_seed(42)
    cpu_only = torch.randn(20)
    torch.manual_seed(42)
    torch.neuron.manual_seed(123)
    torch.neuron.get_rng_state()
    torch.neuron.seed()
    assert torch.equal(torch.randn(20), cpu_only)
    torch.neuron.manual_seed(9)
    before = torch.neuron.get_rng_state()
    torch.randn(100, device="neuron")
    F.dropout(torch.ones(100, device="neuron"), 0.5, True)
    assert torch.equal(torch.neuron.get_rng_state(), before)  # no draw uses them
