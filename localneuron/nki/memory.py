"""SBUF and PSUM capacity, enforced per kernel run.

AWS's simulator gives every tensor its own memory; the real allocator does not. Here each
live on-chip tensor occupies its bytes per partition (PSUM in whole 2 KiB banks, because
PSUM allocations start on a bank boundary) until Python frees it, so a kernel that keeps
too much alive fails with the numbers a user needs to fix it.
"""
import math
import weakref

from . import buffers
from .errors import NkiCapacityError, require


class OnChipMemory:
    def __init__(self, target):
        self.target = target
        self.used = {"sbuf": 0, "psum": 0}
        self.peak = {"sbuf": 0, "psum": 0}

    def limit(self, kind):
        return self.target.sbuf_usable_bytes if kind == "sbuf" else self.target.psum_partition_bytes

    def footprint(self, shape, dtype, buffer):
        """Bytes per partition an allocation occupies."""
        bytes_per_partition = math.prod(shape[1:]) * dtype.itemsize
        if buffer is buffers.psum:
            bank = self.target.psum_bank_bytes
            return -(-bytes_per_partition // bank) * bank
        return bytes_per_partition

    def allocate(self, storage):
        shape, buffer = storage.shape, storage.buffer
        require(len(shape) >= 1, f"on-chip tensor {storage.name!r} needs a partition dimension")
        require(shape[0] <= self.target.partitions,
                f"partition dimension of {storage.name!r} is {shape[0]}, which exceeds the "
                f"architecture limit pmax={self.target.partitions}")
        kind = buffers.kind(buffer)
        need = self.footprint(shape, storage.dtype, buffer)
        limit = self.limit(kind)
        if self.used[kind] + need > limit:
            raise NkiCapacityError(
                f"{kind.upper()} capacity exceeded on {self.target.name}: {storage.name!r} "
                f"{list(shape)} {storage.dtype} needs {need} bytes per partition, "
                f"{self.used[kind]} of {limit} bytes per partition are already live")
        self.used[kind] += need
        self.peak[kind] = max(self.peak[kind], self.used[kind])
        weakref.finalize(storage, self._release, kind, need)

    def _release(self, kind, amount):
        self.used[kind] -= amount
