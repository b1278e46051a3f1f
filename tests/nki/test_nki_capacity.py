"""SBUF and PSUM capacity are enforced per kernel run, by live allocations."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl

X = np.zeros((128, 8), dtype=np.float32)


def run(body):
    def kernel(a):
        body()
    nki.simulate(kernel)(X)


@pytest.fixture(autouse=True)
def gen3(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")


def test_sbuf_overflow_reports_sizes():
    def body():
        keep = [nl.ndarray((128, 16 * 1024), nl.float32, buffer=nl.sbuf) for _ in range(3)]   # 3 x 64 KiB
        keep.append(nl.ndarray((128, 10 * 1024), nl.float32, buffer=nl.sbuf))                  # + 40 KiB > 224 KiB
    with pytest.raises(nki.NkiCapacityError) as error:
        run(body)
    message = str(error.value)
    assert "SBUF capacity exceeded on gen3" in message
    assert "needs 40960 bytes per partition" in message and "196608 of 229376" in message


def test_psum_holds_eight_banks_and_rounds_allocations_up_to_a_bank():
    def eight_banks():
        return [nl.ndarray((128, 100), nl.float32, buffer=nl.psum) for _ in range(8)]  # 400 B -> one bank each
    run(eight_banks)

    def nine_banks():
        keep = eight_banks()
        keep.append(nl.ndarray((128, 1), nl.float32, buffer=nl.psum))
    with pytest.raises(nki.NkiCapacityError, match="PSUM capacity exceeded on gen3: .* needs 2048 bytes per "
                                                   "partition, 16384 of 16384"):
        run(nine_banks)


def test_released_tiles_free_their_space_for_loop_allocations():
    def body():
        for _ in range(100):
            tile = nl.ndarray((128, 16 * 1024), nl.float32, buffer=nl.sbuf)   # 64 KiB, rebound each time
            nisa.memset(dst=tile, value=0.0)
            acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            nisa.memset(dst=acc, value=0.0)
    run(body)


def test_capacity_follows_the_target(monkeypatch):
    def body():
        nl.ndarray((128, 180 * 1024), nl.uint8, buffer=nl.sbuf)
    run(body)                                                   # 224 KiB partitions on gen3
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")
    with pytest.raises(nki.NkiCapacityError, match="on gen2: .* of 180224 bytes per partition"):
        run(body)                                               # 192 KiB minus a 16 KiB reserve on gen2


def test_report_shows_peak_usage():
    def body(a):
        keep = [nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf) for _ in range(3)]
        nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    report = nki.benchmark(body, numerics=False)(nki.ShapeOnly((1,)))
    assert report.sbuf_peak_bytes == 3 * 4096 and report.psum_peak_bytes == 2048
