"""nl.tile_size: hardware tile limits of the current target."""
from .. import generation
from ..isa.vector import BN_STATS_FMAX


def _target():
    from ..run import _active
    run = getattr(_active, "run", None)
    return run.target if run is not None else generation.current()


class _TileSize:
    """Figures of the current target (localneuron.costmodel.hardware); bn_stats_fmax is the instruction's."""
    bn_stats_fmax = BN_STATS_FMAX

    @property
    def pmax(self):
        return _target().partitions

    @property
    def psum_bank_fmax(self):
        """fp32 elements per partition in one PSUM bank."""
        return _target().psum_bank_bytes // 4

    psum_fmax = psum_bank_fmax   # deprecated name of psum_bank_fmax

    @property
    def gemm_stationary_fmax(self):
        return _target().pe_array

    @property
    def gemm_moving_fmax(self):
        return _target().gemm_moving_fmax_fp32_dst

    @property
    def psum_num_banks(self):
        return _target().psum_banks

    @property
    def sbuf_size_bytes(self):
        t = _target()
        return t.sbuf_bytes

    @property
    def total_available_sbuf_size(self):
        """Bytes per partition a kernel may allocate (what the compiler leaves of each SBUF partition)."""
        return _target().sbuf_usable_bytes

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
