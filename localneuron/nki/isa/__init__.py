"""nki.isa: one call per NeuronCore instruction, destination first (NKI >= 0.2 form)."""
from .activation import activation, activation_reduce, exponential
from .dma import dma_compute, dma_copy, dma_transpose
from .elementwise import memset, tensor_copy, tensor_scalar, tensor_tensor
from . import constants
from .constants import (dge_mode, dma_engine, engine, get_nc_version, gpsimd_engine, matmul_perf_mode, nc_version,
                        oob_mode, reduce_cmd, scalar_engine, tensor_engine, vector_engine)
from .fused import scalar_tensor_tensor, tensor_scalar_reduce
from .gpsimd import affine_select, iota, local_gather, nc_n_gather, nonzero_with_count
from .lnc import core_barrier, sendrecv
from .mx import nc_matmul_mx, quantize_mx
from .registers import register_alloc, register_load, register_move, register_store
from .vector import (bn_aggr, bn_stats, max8, nc_find_index8, nc_match_replace8, nc_stream_shuffle, range_select,
                     reciprocal, tensor_copy_predicated, tensor_partition_reduce, tensor_tensor_scan)
from .matmul import nc_matmul, nc_transpose
from .reduce import tensor_reduce

