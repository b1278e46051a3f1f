"""Logical NeuronCores (LNC) and core reservation, as the Neuron runtime documents them: NEURON_LOGICAL_NC_CONFIG groups
1 or 2 physical NeuronCores into each device (2 by default on trn2 and trn3), so a trn2 chip shows 4 devices at LNC=2
and 8 at LNC=1, a trn2.48xlarge 64 or 128; each device's HBM capacity, engines and bandwidth are those of its physical
cores. NEURON_RT_NUM_CORES takes the first N free cores (0: all), NEURON_RT_VISIBLE_CORES names them and wins.
The configuration is read when the device is set up, so the process-wide behaviour runs in fresh interpreters."""
import pytest
import torch

from localneuron.costmodel.work import price_op
from localneuron.runtime.config import ConfigurationError, device_config, selected_target
from tests.support.cli_runner import localneuron
from tests.support.fresh_python import run_python

GIB = 1 << 30


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for name in ("NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_NUM_CORES", "NEURON_RT_VISIBLE_CORES", "LOCALNEURON_CHIPS",
                 "LOCAL_WORLD_SIZE", "LOCALNEURON_TARGET", "LOCALNEURON_HBM_BYTES_PER_CORE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("target, lnc, per_chip, hbm_gib", [
    ("trn2", None, 4, 24), ("trn2", "2", 4, 24), ("trn2", "1", 8, 12),
    ("trn3", None, 4, 36), ("trn3", "1", 8, 18),
])
def test_devices_per_chip_and_hbm_per_device_follow_the_lnc(monkeypatch, target, lnc, per_chip, hbm_gib):
    monkeypatch.setenv("LOCALNEURON_TARGET", target)
    if lnc:
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    config = device_config()
    assert config.target.lnc == int(lnc or 2)
    assert config.visible_cores == tuple(range(per_chip))
    assert config.hbm_bytes_per_core == hbm_gib * GIB
    monkeypatch.setenv("LOCALNEURON_CHIPS", "16")   # the largest instance: 64 devices at LNC=2, 128 at LNC=1
    assert len(device_config().visible_cores) == 16 * per_chip


@pytest.mark.parametrize("value", ["0", "3", "4", "8", "two", "1.0"])
def test_an_lnc_other_than_1_or_2_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", value)
    with pytest.raises(ConfigurationError, match=rf"NEURON_LOGICAL_NC_CONFIG='{value}' is not valid: expected one of "
                                                 r"1, 2"):
        device_config()


def test_a_device_at_lnc_1_is_priced_as_one_physical_core(monkeypatch):
    """Compute-bound (a large bf16 matmul) and memory-bound (a large add) work take about twice as long on a device of
    one physical core as on one of two; the launch cost stays."""
    a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    big = torch.empty(1 << 26, device="meta")
    at = {}
    for lnc in ("2", "1"):
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
        chip = selected_target()
        at[lnc] = (price_op(chip, "aten::mm", [a, a], [a]).seconds, price_op(chip, "aten::add", [big, big], [big]).seconds,
                   chip.bf16_flops_per_core, chip.hbm_bytes_per_s_reached())
    mm2, add2, flops2, hbm2 = at["2"]
    mm1, add1, flops1, hbm1 = at["1"]
    assert flops2 == 2 * flops1 and hbm2 == pytest.approx(2 * hbm1)
    assert 1.8 < mm1 / mm2 <= 2.0 and 1.8 < add1 / add2 <= 2.0


def test_num_cores_takes_the_first_cores_and_visible_cores_win(monkeypatch):
    monkeypatch.setenv("NEURON_RT_NUM_CORES", "2")
    assert device_config().visible_cores == (0, 1)
    monkeypatch.setenv("NEURON_RT_NUM_CORES", "0")   # the runtime's default: all
    assert device_config().visible_cores == (0, 1, 2, 3)
    monkeypatch.setenv("NEURON_RT_NUM_CORES", "5")
    with pytest.raises(ConfigurationError, match=r"NEURON_RT_NUM_CORES=5 asks for more NeuronCores than the simulated "
                                                 r"instance has: 4 \(1 chip\(s\), 4 logical NeuronCores a chip at "
                                                 r"LNC=2\); ask for fewer, or raise LOCALNEURON_CHIPS"):
        device_config()
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")   # 8 cores a chip: 5 fit
    assert device_config().visible_cores == tuple(range(5))
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "6-7")  # takes precedence, as the runtime's guide says
    assert device_config().visible_cores == (6, 7)
    monkeypatch.setenv("NEURON_RT_NUM_CORES", "-1")
    with pytest.raises(ConfigurationError, match="NEURON_RT_NUM_CORES='-1' is not valid: expected a whole number "
                                                 "from 0 to 128"):
        device_config()


def test_ranks_on_one_host_fill_chips_of_the_configured_size(monkeypatch):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert len(device_config().visible_cores) == 8        # one chip
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "128")
    assert len(device_config().visible_cores) == 128      # a trn2.48xlarge
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "129")
    with pytest.raises(ConfigurationError, match=r"LOCAL_WORLD_SIZE=129 ranks on one host need 17 chips \(8 logical "
                                                 r"NeuronCores a chip at LNC=1\); .* at most 16 \(128 NeuronCores\)"):
        device_config()


def test_compiled_graphs_are_cached_per_lnc(monkeypatch):
    """neuronx-cc compiles a graph for one LNC (-lnc, which must match the runtime's): a graph compiled at LNC=2 is not
    reused at LNC=1."""
    from localneuron.compiler import host_compile, settings

    gm = torch.fx.symbolic_trace(lambda x: x * 2)
    compile_settings = settings.resolve(None, None)
    keys = {}
    for lnc in ("2", "1"):
        monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
        keys[lnc] = host_compile.cache_key(gm, [torch.ones(3)], False, compile_settings)
    assert keys["1"] != keys["2"]


LARGEST_INSTANCE = """
import torch, torch_neuronx
n = torch_neuronx.device_count()
props = torch_neuronx.get_device_properties(n - 1)
x = torch.arange(6.0, device=f"neuron:{n - 1}").reshape(2, 3)
y = (x @ x.T + 1).cpu()
with torch.neuron.device(n - 1):
    z = torch.ones(4, device="neuron")
w = torch.ones(3, device=f"neuron:{n - 2}", requires_grad=True)
(w * 3).sum().backward()
torch.neuron.synchronize()
print(n, torch.neuron.device_count(), props.total_memory // 2**30, "LNC=1" in props.name,
      torch.equal(y, torch.arange(6.0).reshape(2, 3) @ torch.arange(6.0).reshape(2, 3).T + 1), z.device,
      w.grad.cpu().tolist(), torch_neuronx.utils.get_logical_neuron_cores())
"""


def test_a_trn2_48xlarge_at_lnc_1_shows_128_devices_and_runs_on_the_last():
    r = run_python(LARGEST_INSTANCE, env={"NEURON_LOGICAL_NC_CONFIG": "1", "LOCALNEURON_CHIPS": "16"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["128", "128", "12", "True", "True", "neuron:127", "[3.0,", "3.0,", "3.0]", "1"], r.stdout


def test_info_names_the_lnc():
    r = localneuron("info", env={"NEURON_LOGICAL_NC_CONFIG": "1"})
    assert "logical-neuroncore-config: 1 (8 NeuronCores a chip; NEURON_LOGICAL_NC_CONFIG)" in r.stdout, r.stdout
    assert "visible NeuronCores: 8" in r.stdout
