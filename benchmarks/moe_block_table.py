"""Writes localneuron/costmodel/moe_block_table.py, which costmodel/moe_blocks.py reads: the time per block of AWS's
NKI Library context-encoding MoE kernel, as the NKI cycle model (localneuron/nki) runs it, per hidden size and
expert intermediate size per rank, on each generation and logical-core size it is written for.

The kernel is blockwise_mm_baseline_shard_intermediate (nkilib/core/moe/moe_cte/bwmm_shard_on_I.py, the
`shard_on_i` implementation of moe_cte.py, TRN2). It walks the blocks one after another (nl.sequential_range, and
a core barrier after each): per block it loads the block's token indices and its expert, gathers the block's rows
of the hidden states from HBM (an indirect DMA), transposes them on TensorE, loads that expert's gate/up and down
weights from HBM (every block again, whichever expert the previous block had), runs gate and up, the activation
and the down projection (the intermediate split over the logical core's physical cores), reads the output rows the
block adds to (top-k accumulation), scales by the router's affinities and scatters the block back. Before the
first block it zeroes the output. So its time is a fixed part plus the same time for every block: the table holds
both, the per-block part as the difference between runs of BLOCKS[1] and BLOCKS[0] blocks.

The kernel needs the NKI Library tree (localneuron/nki/library_tree.find; docs/nki-library.md says how to fetch
it); the run is timing-only (shapes, no values). A shape whose intermediate gives a physical core less than one
full 128-row tile is not in the grid: there the kernel issues the same instructions on a partial tile, and the
cost model uses the smallest entry (moe_blocks.py).

    python3 benchmarks/moe_block_table.py      # about a minute; prints the time it took
"""
import importlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from localneuron.nki import library_tree  # noqa: E402

TABLE = ROOT / "localneuron" / "costmodel" / "moe_block_table.py"
BLOCK = 512              # rows per block: NxD's DEFAULT_BLOCK_SIZE (costmodel/stacks.py, moe_prefill_block)
TOKENS = 4096            # the prompt's tokens; only the output's zeroing (the fixed part) depends on it
EXPERTS = 16
BLOCKS = (2, 6)
HIDDEN = (1024, 2048, 3072, 4096, 5120, 6144)   # the kernel takes 512..8192, multiples of 512
INNER = (256, 512, 1024)                   # the expert intermediate per rank (I_TP)
# (chip, lnc) -> the NKI generation the cycle model runs: the kernel is written for TRN2 at LNC=2 (its blocks' work is
# split over the logical core's two physical cores; on one it fails, and gen2's SBUF does not hold its plan at large
# hidden sizes). Larger grids than this one outgrow the simulator's SBUF (its tiles live to the end of their scope).
TARGETS = {("trn2", 2): "gen3"}


def _kernel():
    root = library_tree.find(None)
    if root is None:
        sys.exit(f"no NKI Library tree found; fetch it with: {library_tree.FETCH_COMMAND}")
    for path in (ROOT / "localneuron" / "nki" / "library_shim", Path(root) / "src" / "nkilib_src"):
        sys.path.insert(0, str(path))
    module = importlib.import_module("nkilib.core.moe.moe_cte.bwmm_shard_on_I")
    modes = importlib.import_module("nkilib.core.utils.common_types").ExpertAffinityScaleMode
    return module.blockwise_mm_baseline_shard_intermediate, modes


def kernel_seconds(kernel, modes, lnc: int, hidden: int, inner: int, blocks: int) -> float:
    """The cycle model's time of one launch over `blocks` blocks (bf16, top-k accumulating, affinities applied to
    the intermediate: the kernel's defaults)."""
    import nki
    shape = nki.ShapeOnly
    report = nki.benchmark(kernel[lnc], numerics=False)(
        shape((TOKENS + 1, hidden), "bfloat16"), shape(((TOKENS + 1) * EXPERTS, 1), "bfloat16"),
        shape((EXPERTS, hidden, 2, inner), "bfloat16"), shape((EXPERTS, inner, hidden), "bfloat16"),
        token_position_to_id=shape((blocks * BLOCK,), "int32"), block_to_expert=shape((blocks, 1), "int32"),
        block_size=BLOCK, expert_affinities_scaling_mode=modes.PRE_SCALE)
    return report.latency_ns * 1e-9


def main():
    started = time.perf_counter()
    table = {}
    for (chip, lnc), generation in TARGETS.items():
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = generation
        kernel, modes = _kernel()
        entries = {}
        for hidden in HIDDEN:
            for inner in INNER:
                try:
                    few, many = (kernel_seconds(kernel, modes, lnc, hidden, inner, n) for n in BLOCKS)
                except Exception as error:   # noqa: BLE001 - a shape the simulator cannot hold is left out
                    print(f"{chip} lnc={lnc} hidden {hidden} inner {inner}: not run ({type(error).__name__}: "
                          f"{str(error).splitlines()[0][:120]})", flush=True)
                    continue
                per_block = (many - few) / (BLOCKS[1] - BLOCKS[0])
                entries[(hidden, inner)] = (few - BLOCKS[0] * per_block, per_block)
                print(f"{chip} lnc={lnc} hidden {hidden} inner {inner}: {per_block * 1e6:.1f} us a block, "
                      f"{entries[(hidden, inner)][0] * 1e6:.1f} us fixed", flush=True)
        table[(chip, lnc)] = entries
    lines = [f'"""The NKI Library context-encoding MoE kernel (bwmm_shard_on_I) as the NKI cycle model runs it: '
             f'(fixed seconds,\nseconds per block of {BLOCK} rows), bf16, per (hidden, expert intermediate per rank). '
             f'Generated by\nbenchmarks/moe_block_table.py; do not edit; costmodel/moe_blocks.py reads it."""',
             f"BLOCK = {BLOCK}", f"HIDDEN = {HIDDEN}", f"INNER = {INNER}",
             "# (chip, lnc) -> {(hidden, inner): (fixed seconds, seconds a block)}", "TABLE = {"]
    for key, entries in table.items():
        lines.append(f"    {key!r}: {{")
        lines += [f"        {shape!r}: ({fixed:.4e}, {per:.4e})," for shape, (fixed, per) in entries.items()]
        lines.append("    },")
    lines.append("}")
    TABLE.write_text("\n".join(lines) + "\n")
    print(f"wrote {TABLE.relative_to(ROOT)} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
