"""nisa enumerations (values as published) and the NeuronCore version query."""
from enum import Enum, IntEnum


class engine(IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


# Engine selection arguments (`engine=nisa.vector_engine`): the engine enum's members under their own names.
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd


class dma_engine(Enum):
    """Which DMA hardware moves the data of a DMA instruction (sendrecv, dma_copy): the DMA rings, or
    descriptors the GpSimd engine generates (software DGE)."""
    dma = 0
    gpsimd_dma = 1


class reduce_cmd(Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(Enum):
    unknown = 0
    none = 1
    swdge = 2
    hwdge = 3


class oob_mode(Enum):
    error = 0
    skip = 1


class matmul_perf_mode(Enum):
    none = 0
    double_row = 1


class nc_version(IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version():
    from ..run import current_run
    return nc_version[current_run().target.name]
