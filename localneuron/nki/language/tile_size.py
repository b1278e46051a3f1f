"""nl.tile_size: hardware tile limits of the current target."""
from .. import generation


def _target():
    from ..run import _active
    run = getattr(_active, "run", None)
    return run.target if run is not None else generation.current()


class _TileSize:
    pmax = 128
    psum_fmax = 512            # deprecated name of psum_bank_fmax
    psum_bank_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512

    @property
    def psum_num_banks(self):
        return _target().psum_banks

    @property
    def sbuf_size_bytes(self):
        t = _target()
        return t.sbuf_usable_bytes * 128

    @property
    def sbuf_fmax_bytes(self):
        return _target().sbuf_usable_bytes

    @property
    def psum_bank_fmax_bytes(self):
        return _target().psum_bank_bytes

    def __repr__(self):
        return f"nl.tile_size(pmax={self.pmax}, psum_bank_fmax={self.psum_bank_fmax}, " \
               f"gemm_stationary_fmax={self.gemm_stationary_fmax}, gemm_moving_fmax={self.gemm_moving_fmax})"


tile_size = _TileSize()
