"""Tensors of a simulated kernel: one Storage per allocation, NkiTensor views onto it.

A view is an access pattern (element offset, shape, element strides) over its storage, the
way the hardware addresses memory; slicing, reshape and `.ap()` only change the pattern.
Float storages hold float32 values already rounded to the tile's format; a timing-only run
keeps no data at all (`Storage.data is None`), so huge kernels can be costed from shapes.
"""
import math

import numpy as np

from . import buffers
from .dtypes import to_storage
from .errors import NkiUsageError

# Fresh allocations read as NaN (floats) or 4 (integers), as on AWS's simulator, so that a
# read of memory nothing wrote shows up in the results; packed MX items are all ones (NaN elements).
POISON_FLOAT = np.nan
POISON_INT = 4


class Storage:
    __slots__ = ("shape", "dtype", "buffer", "name", "data", "row_size",
                 "reads", "writes", "matmul_open", "__weakref__")

    def __init__(self, shape, dtype, buffer, name, data):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.buffer = buffer
        self.name = name
        self.data = data            # flat numpy array, or None in a timing-only run
        self.row_size = math.prod(self.shape[1:])
        self.reads = {}             # cycle model: access box -> time the last reader finished
        self.writes = {}            # cycle model: access box -> (data ready, writer done, writer engine)
        # PSUM only: elements an open matmul accumulation group is adding into.
        self.matmul_open = None

    @classmethod
    def poisoned(cls, shape, dtype, buffer, name, with_data):
        data = None
        if with_data:
            fill = POISON_FLOAT if dtype.is_float else np.iinfo(dtype.storage).max if dtype.is_packed else POISON_INT
            data = np.full(math.prod(shape), fill, dtype=dtype.storage)
        storage = cls(shape, dtype, buffer, name, data)
        if buffer is buffers.psum and with_data:
            storage.matmul_open = np.zeros(math.prod(shape), dtype=bool)
        return storage


def _row_major_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class NkiTensor:
    __slots__ = ("storage", "offset", "shape", "strides")

    def __init__(self, storage, offset=0, shape=None, strides=None):
        self.storage = storage
        self.offset = offset
        self.shape = tuple(storage.shape if shape is None else shape)
        self.strides = tuple(_row_major_strides(self.shape) if strides is None else strides)

    # --- metadata -----------------------------------------------------------------------
    dtype = property(lambda self: self.storage.dtype)
    buffer = property(lambda self: self.storage.buffer)
    name = property(lambda self: self.storage.name)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    @property
    def num_partitions(self):
        return self.shape[0] if self.shape else 1

    @property
    def free_size(self):
        """Elements per partition."""
        return math.prod(self.shape[1:])

    @property
    def partition_start(self):
        return self.offset // self.storage.row_size if self.storage.row_size else 0

    def __repr__(self):
        return f"NkiTensor({self.name!r}, shape={list(self.shape)}, dtype={self.dtype}, buffer={self.buffer})"

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        raise NkiUsageError("NKI tensors cannot be iterated; index them with slices instead")

    def __bool__(self):
        raise NkiUsageError("the truth value of an NKI tensor is unknown while the kernel is traced; "
                            "compare on the host after the kernel returns")

    # --- views --------------------------------------------------------------------------
    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = (slice(None),) * (self.ndim - len(index) + 1)
            index = index[:at] + fill + index[at + 1:]
        if len(index) > self.ndim:
            raise IndexError(f"{len(index)} indices for a {self.ndim}-d tensor {self.name!r}")
        offset, shape, strides = self.offset, [], []
        for axis, (i, n, stride) in enumerate(zip(index + (slice(None),) * (self.ndim - len(index)),
                                                   self.shape, self.strides)):
            if isinstance(i, slice):
                start, stop, step = i.indices(n)
                if step <= 0:
                    raise IndexError("NKI slices need a positive step")
                if i.stop is not None and i.stop > n:
                    raise IndexError(f"slice stop {i.stop} is out of bounds for axis {axis} "
                                     f"of size {n} in {self.name!r}")
                offset += start * stride
                shape.append(max(0, -(-(stop - start) // step)))
                strides.append(stride * step)
            else:
                i = int(i)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} of size {n} in {self.name!r}")
                offset += (i % n) * stride
        return NkiTensor(self.storage, offset, shape, strides)

    def is_contiguous(self):
        return self.strides == _row_major_strides(self.shape) or self.size <= 1

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape {list(self.shape)} into {list(shape)}")
        if not self.is_contiguous():
            raise NkiUsageError(f"reshape of a non-contiguous view of {self.name!r}; slice after reshaping")
        return NkiTensor(self.storage, self.offset, shape)

    def ap(self, pattern, offset=0, dtype=None, scalar_offset=None, vector_offset=None, indirect_dim=None):
        """Raw access pattern: `pattern` is [[stride, count], ...] in elements, from this view's start.

        scalar_offset (a register or a one-element tile, read now) moves the view by that many steps of this
        tensor's dimension `indirect_dim` (dynamic addressing; 0 unless named); vector_offset (per-partition
        indices, an indirect DMA) is costed in timing-only runs as the direct pattern; dtype must be the tensor's own (the simulator keeps
        values, not raw bits, so a reinterpreting view has nothing to show)."""
        if dtype is not None and dtype != self.dtype:
            raise NkiUsageError(f"ap(dtype={dtype}) on {self.name!r} ({self.dtype}): reinterpreting an access "
                                f"pattern as another dtype is not simulated; use the tensor's own dtype")
        strides = tuple(int(p[0]) for p in pattern)
        shape = tuple(int(p[1]) for p in pattern)
        if vector_offset is not None:
            # A timing-only run (no values) costs an indirect DMA as the direct one of the same pattern: the
            # same rows of the same contiguous length, each row at an index the run does not know.
            if self.storage.data is not None or (isinstance(vector_offset, NkiTensor)
                                                 and vector_offset.storage.data is not None):
                raise NkiUsageError(f"ap(vector_offset=...) on {self.name!r}: indirect (per-index) DMA addressing "
                                    f"is simulated in timing-only runs (nki.benchmark(numerics=False)) only; gather "
                                    f"with nisa.nc_n_gather / local_gather or per-index copies")
            if not 0 <= int(indirect_dim or 0) < self.ndim:   # a dimension of this tensor, 0 unless named
                raise NkiUsageError(f"ap(vector_offset=...): indirect_dim {indirect_dim!r} is not a dimension of "
                                    f"{self.name!r} (0..{self.ndim - 1})")
        if scalar_offset is not None:
            # indirect_dim names a dimension of this tensor (NKI's indirect access pattern indexes a physical
            # dimension of the base tensor; the NKI Library's TensorView._dynamic_select), 0 unless named
            dim = int(indirect_dim or 0)
            if not 0 <= dim < self.ndim:
                raise NkiUsageError(f"ap(scalar_offset=...): indirect_dim {indirect_dim!r} is not a dimension of "
                                    f"{self.name!r} (0..{self.ndim - 1})")
            steps = scalar_offset if not isinstance(scalar_offset, NkiTensor) else \
                np.asarray(scalar_offset.read()).reshape(-1)[0] if scalar_offset.storage.data is not None else 0
            offset = int(offset) + int(steps) * self.strides[dim]
        view = NkiTensor(self.storage, self.offset + int(offset), shape, strides)
        last = view.offset + sum((n - 1) * s for n, s in zip(shape, strides))
        if view.offset < 0 or last >= math.prod(self.storage.shape):
            raise IndexError(f"access pattern {pattern} (offset {offset}) leaves {self.name!r}")
        return view

    # --- data (numerics runs only) ------------------------------------------------------
    def _host_view(self):
        data = self.storage.data
        item = data.itemsize
        return np.lib.stride_tricks.as_strided(
            data[self.offset:], self.shape, tuple(s * item for s in self.strides))

    def read(self):
        """Current values, as stored (float tiles as float32, integer tiles as integers)."""
        return np.array(self._host_view())

    def read_fp32(self):
        """Values as an engine sees them: converted to fp32."""
        return self._host_view().astype(np.float32)

    def write(self, values, precise=True):
        """Store engine results, rounding to this tile's dtype."""
        values = np.broadcast_to(np.asarray(values), self.shape) if np.ndim(values) == 0 else \
            np.asarray(values).reshape(self.shape)
        data = self.storage.data
        item = data.itemsize
        target = np.lib.stride_tricks.as_strided(
            data[self.offset:], self.shape, tuple(s * item for s in self.strides), writeable=True)
        target[...] = to_storage(values, self.dtype, precise)

    def flat_indices(self):
        """Storage indices this view touches (for per-element state such as PSUM accumulation)."""
        index = np.full(self.shape, self.offset, dtype=np.int64)
        for axis, (n, s) in enumerate(zip(self.shape, self.strides)):
            shape = [1] * self.ndim
            shape[axis] = n
            index = index + (np.arange(n) * s).reshape(shape)
        return index

    # --- address range for dependency tracking ------------------------------------------
    def box(self):
        """(first row, end row, first element in row, end element in row) this view touches.

        A row is a partition for on-chip tensors and the leading dimension for HBM tensors.
        Exact for the usual tile views; a conservative bounding box for exotic patterns.
        """
        row = self.storage.row_size or 1
        lo = self.offset
        if self.ndim and self.strides[0] == row:
            inner = sum((n - 1) * s for n, s in zip(self.shape[1:], self.strides[1:]))
            first = lo % row
            if first + inner < row:
                return (lo // row, lo // row + self.shape[0], first, first + inner + 1)
        extent = sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return (lo // row, (lo + extent) // row + 1, 0, row)
