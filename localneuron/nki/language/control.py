"""Loops, SPMD coordinates, ordering and debugging inside a kernel.

In the current NKI all loop helpers unroll at specialisation time, so they are plain Python
ranges here; the cycle model finds the parallelism from data dependencies, not loop kinds.
"""
from contextlib import nullcontext

from ..run import current_run


def affine_range(*args):
    return range(*args)


def sequential_range(*args):
    return range(*args)


def static_range(*args):
    return range(*args)


def dynamic_range(*args):
    return range(*args)


def fori_loop(lower, upper, body_fun, step=1):
    for i in range(lower, upper, step):
        body_fun(i)


def ds(start, size):
    """Dynamic slice helper: ds(start, size) == slice(start, start + size)."""
    return slice(start, start + size)


def no_reorder():
    # Engines already issue in program order here; the block needs no extra effect.
    return nullcontext()


def program_id(axis=0):
    """This instance's coordinate along `axis` of the launch grid (the LNC core under kernel[2])."""
    return current_run().coordinates[axis]


def num_programs(axes=0):
    grid = current_run().grid
    if isinstance(axes, int):
        return grid[axes]
    count = 1
    for axis in axes:
        count *= grid[axis]
    return count


def program_ndim():
    return len(current_run().grid)


def device_print(prefix, tile):
    """Print a tile's current values (numerics runs; timing-only runs print its shape)."""
    run = current_run()
    print(prefix, tile.read() if run.numerics else f"<{list(tile.shape)} {tile.dtype}>")
