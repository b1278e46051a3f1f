"""Target selection: NEURON_PLATFORM_TARGET_OVERRIDE, else the simulated device's generation."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl


def version_and_tile_size():
    @nki.jit
    def probe(a):
        out = nl.ndarray((1, 3), nl.int32, buffer=nl.shared_hbm)
        info = nl.ndarray((1, 3), nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=info, pattern=[[0, 3]], offset=int(nisa.get_nc_version()))
        nl.store(out, info)
        return out, nl.tile_size.sbuf_fmax_bytes, nl.tile_size.psum_num_banks
    versions, sbuf, banks = nki.simulate(probe)(np.zeros(1, np.float32))
    return int(versions[0, 0]), sbuf, banks


@pytest.mark.parametrize("override, version, sbuf", [("trn1", 2, 176 * 1024), ("inf2", 2, 176 * 1024),
                                                     ("gen3", 3, 224 * 1024), ("trn3", 4, 256 * 1024)])
def test_override_selects_the_generation(monkeypatch, override, version, sbuf):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", override)
    assert version_and_tile_size() == (version, sbuf, 8)


@pytest.mark.parametrize("device_target, version", [("trn2", 3), ("trn3", 4)])
def test_default_follows_the_simulated_device(monkeypatch, device_target, version):
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    monkeypatch.setenv("LOCALNEURON_TARGET", device_target)
    assert version_and_tile_size()[0] == version


def test_unknown_override_is_rejected(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match="unknown NeuronCore target 'trn9'"):
        version_and_tile_size()


def test_tile_size_constants():
    assert (nl.tile_size.pmax, nl.tile_size.psum_bank_fmax, nl.tile_size.gemm_stationary_fmax,
            nl.tile_size.gemm_moving_fmax) == (128, 512, 128, 512)
