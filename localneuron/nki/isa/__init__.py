"""nki.isa: one call per NeuronCore instruction, destination first (NKI >= 0.2 form)."""
from .activation import activation, activation_reduce, exponential
from .dma import dma_copy
from .elementwise import memset, tensor_copy, tensor_scalar, tensor_tensor
from . import constants
from .constants import (dge_mode, dma_engine, engine, get_nc_version, gpsimd_engine, matmul_perf_mode, nc_version,
                        oob_mode, reduce_cmd, scalar_engine, tensor_engine, vector_engine)
from .fused import scalar_tensor_tensor, tensor_scalar_reduce
from .gpsimd import affine_select, iota
from .matmul import nc_matmul, nc_transpose
from .reduce import tensor_reduce

__all__ = ["activation", "activation_reduce", "affine_select", "dge_mode", "dma_copy", "engine",
           "exponential", "get_nc_version", "iota", "matmul_perf_mode", "memset", "nc_matmul",
           "nc_transpose", "nc_version", "oob_mode", "reduce_cmd", "scalar_tensor_tensor", "tensor_copy",
           "tensor_reduce", "tensor_scalar", "tensor_scalar_reduce", "tensor_tensor"]
