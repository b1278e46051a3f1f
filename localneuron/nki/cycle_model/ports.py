"""Shared SBUF/PSUM ports: engines that cannot access a memory at the same time (the NKI architecture guide,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium_inferentia2_arch.html).

On gen2, VectorE and GpSimd share the SBUF port and VectorE and ScalarE share the PSUM port.
From gen3 only VectorE and ScalarE conflict, and only on the same PSUM bank.
"""
from .. import buffers

# target -> (engines that contend, memory they contend on, granularity)
PORT_CONFLICTS = {
    "gen2": ((frozenset({"vector", "gpsimd"}), "sbuf", "memory"),
             (frozenset({"vector", "scalar"}), "psum", "memory")),
    "gen3": ((frozenset({"vector", "scalar"}), "psum", "bank"),),
    "gen4": ((frozenset({"vector", "scalar"}), "psum", "bank"),),
}


def contended_ports(target, engine, tiles):
    """Keys of the shared ports this instruction occupies while it runs."""
    keys = set()
    for engines, memory, granularity in PORT_CONFLICTS[target.name]:
        if engine not in engines:
            continue
        for tile in tiles:
            if buffers.kind(tile.buffer) != memory:
                continue
            if granularity == "memory":
                keys.add(memory)
            else:
                first_byte = (tile.offset % tile.storage.row_size) * tile.dtype.itemsize
                keys.add((id(tile.storage), first_byte // target.psum_bank_bytes))
    return keys
