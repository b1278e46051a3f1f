"""nki.language (nl): tensors, buffers, dtypes, math, reductions, loops and convenience wrappers."""
from .. import dtypes as _dtypes
from ..activations import BY_NAME as _ACTIVATIONS
from ..alu import (add, bitwise_and, bitwise_or, bitwise_xor, divide, equal, fmod, greater, greater_equal,
                   left_shift, less, less_equal, logical_and, logical_or, logical_xor, maximum, minimum, mod,
                   multiply, not_equal, power, right_shift, subtract)
from ..buffers import hbm, is_hbm, is_on_chip, is_psum, is_sbuf, private_hbm, psum, sbuf, shared_hbm
from ..tensor import NkiTensor
from .control import (affine_range, device_print, ds, dynamic_range, fori_loop, no_reorder, num_programs,
                      program_id, program_ndim, sequential_range, static_range)
from .creation import (empty_like, full, ndarray, ones, ones_like, shared_constant, shared_identity_matrix,
                       zeros, zeros_like)
from .elementwise import ceil, floor, invert, logical_not, negative, trunc
from .fused import dropout, rand, random_seed, rms_norm, softmax, where
from .movement import load, load_transpose2d, matmul, store, transpose
from .reductions import all, max, mean, min, prod, sum, var
from .tile_size import tile_size
from .objects import NKIObject, par_dim

dtypes = _dtypes            # nki.language.dtypes: the data types as a module
dtype = _dtypes.NkiDtype    # annotations: `dtype: nl.dtype`
tensor = NkiTensor          # annotations: `x: nl.tensor`
bool = _dtypes.bool_        # noqa: A001  (nl.bool, nl.bool_: the same type)
range = sequential_range    # noqa: A001  (nl.range: a loop the compiler keeps in order, like sequential_range)

# Activation functions double as nl math functions (nl.exp(x), nl.copy(x)) and as `op=` values.
globals().update(_ACTIVATIONS)
# Data types: nl.bfloat16, nl.float32, ...
globals().update(_dtypes.BY_NAME)
