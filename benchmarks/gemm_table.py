"""Writes localneuron/costmodel/gemm_efficiency_table.py, which costmodel/gemm_efficiency.py reads: how close a
well-blocked GEMM comes to TensorE's tile rule (localneuron/costmodel/tiles.py gemm_cycles) on each NeuronCore
generation, per shape and input dtype, as the NKI cycle model (localneuron/nki) runs it. The cost model prices every
eager op as it is issued and sits below the NKI layer, so it reads this generated table instead of running the
kernel.

The kernel is the NKI matrix-multiplication tutorial's fully blocked GEMM
(https://github.com/aws-neuron/aws-neuron-sdk/blob/v2.26.1/nki/tutorials/matrix_multiplication.rst; the tutorial's
4096x8192x8192 BF16 run reaches 85.24% of peak, 6.97 ms) made general: blocks shrink to the shape at its edges, and
the operand with the larger free size moves (the published advice), so the table is keyed by (stationary free size,
contraction, moving free size) with stationary <= moving. The tile rule takes the cheaper orientation of the two
(tiles.gemm_cycles), so an entry holds for [m, k] @ [k, n] and [n, k] @ [k, m] alike.

The tutorial's kernel adds each contraction block's PSUM sums into an SBUF accumulator on VectorE, which is what a
compiler does for many rows (a full block of output tiles outgrows PSUM's 8 banks) but not for a few: there each
output tile's whole contraction fits one PSUM bank. So for a stationary free size of one M tile (<= 128) the
generator also runs gemm_psum, which accumulates every contraction in PSUM and copies each tile out once, and keeps
the faster of the two per shape (schedule()), as a tuned compiler picks its schedule per shape.

    python3 benchmarks/gemm_table.py        # a few minutes; prints the time it took
"""
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from localneuron.costmodel import tiles  # noqa: E402
from localneuron.costmodel.hardware import CHIPS  # noqa: E402

TABLE = ROOT / "localneuron" / "costmodel" / "gemm_efficiency_table.py"

TILE_K = 128   # pmax: the contraction lies on the partitions
TILE_M = 128   # gemm_stationary_fmax
TILE_N = 512   # gemm_moving_fmax: one PSUM bank of fp32 accumulators
# Tiles per block, the tutorial's choice for BF16; fp32 inputs take half the contraction tiles per block so the
# blocks still fit SBUF (a block pair plus the fp32 accumulators: 112 KiB per partition in BF16, 160 KiB in fp32,
# of gen2's 176 KiB usable).
TILES_M, TILES_N = 16, 2
TILES_K = {"bfloat16": 8, "float32": 4}

# The grid, log-spaced: the stationary (smaller) free size from one decode row to a full block (TILES_M tiles:
# larger ones repeat the same blocks), contraction and moving free size from one tile to the largest hidden and
# MLP sizes models use. The stationary grid holds every moving point up to its top, so a lookup whose nearest
# stationary point exceeds its nearest moving one can use the moving one.
STATIONARY = (1, 2, 8, 32, 128, 512, 2048)
CONTRACTION = (128, 512, 2048, 8192, 32768)
MOVING = (128, 512, 2048, 8192, 32768)
DTYPES = ("bfloat16", "float32")


@nki.jit
def gemm_blocked(lhsT, rhs, tiles_k):
    """lhsT.T @ rhs: the tutorial's blocked GEMM with edge blocks and edge tiles as large as the shape leaves."""
    k_size, m_size = lhsT.shape
    _, n_size = rhs.shape
    block_m, block_n, block_k = min(m_size, TILE_M * TILES_M), min(n_size, TILE_N * TILES_N), min(k_size, TILE_K * tiles_k)
    out = nl.ndarray((m_size, n_size), lhsT.dtype, buffer=nl.shared_hbm)
    # One fp32 accumulator row-block per M tile, kept in SBUF across the contraction blocks and reused for every
    # (M, N) block: each block's PSUM sums are evicted into it.
    results = [nl.ndarray((min(TILE_M, block_m), block_n), nl.float32, buffer=nl.sbuf)
               for _ in range(0, block_m, TILE_M)]
    for n0 in nl.affine_range(0, n_size, block_n):
        n_end = min(n_size, n0 + block_n)
        for m0 in nl.affine_range(0, m_size, block_m):
            m_end = min(m_size, m0 + block_m)
            m_tiles = [(m, min(m_end, m + TILE_M)) for m in range(m0, m_end, TILE_M)]
            n_tiles = [(n, min(n_end, n + TILE_N)) for n in range(n0, n_end, TILE_N)]
            for k0 in nl.sequential_range(0, k_size, block_k):
                k_tiles = [(k, min(k_size, k + TILE_K)) for k in range(k0, min(k_size, k0 + block_k), TILE_K)]
                lhs_block = nl.ndarray((TILE_K, len(k_tiles), m_end - m0), lhsT.dtype, buffer=nl.sbuf)
                rhs_block = nl.ndarray((TILE_K, len(k_tiles), n_end - n0), rhs.dtype, buffer=nl.sbuf)
                for t, (k, k1) in enumerate(k_tiles):
                    nisa.dma_copy(dst=lhs_block[:k1 - k, t, :], src=lhsT[k:k1, m0:m_end])
                    nisa.dma_copy(dst=rhs_block[:k1 - k, t, :], src=rhs[k:k1, n0:n_end])
                for result, (m, m1) in zip(results, m_tiles):
                    for n, n1 in n_tiles:
                        partial = nl.ndarray((m1 - m, n1 - n), nl.float32, buffer=nl.psum)
                        for t, (k, k1) in enumerate(k_tiles):
                            nisa.nc_matmul(dst=partial, stationary=lhs_block[:k1 - k, t, m - m0:m1 - m0],
                                           moving=rhs_block[:k1 - k, t, n - n0:n1 - n0])
                        columns = result[:m1 - m, n - n0:n1 - n0]
                        if k0 == 0:   # the first block's sums start the accumulator: no memset pass
                            nisa.tensor_copy(dst=columns, src=partial)
                        else:
                            nisa.tensor_tensor(dst=columns, data1=columns, data2=partial, op=nl.add)
            for result, (m, m1) in zip(results, m_tiles):
                staged = nl.ndarray((m1 - m, n_end - n0), out.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=staged, src=result[:m1 - m, :n_end - n0])
                nisa.dma_copy(dst=out[m:m1, n0:n_end], src=staged)
    return out


PSUM_BANKS = 8   # 2 KiB per partition each: one [TILE_M, TILE_N] fp32 output tile


@nki.jit
def gemm_psum(lhsT, rhs, tiles_k):
    """lhsT.T @ rhs for a few stationary rows (m_size <= TILE_M): each output tile accumulates its whole contraction
    in its own PSUM bank (nc_matmul adds into its PSUM tile across every K tile), up to PSUM_BANKS tiles a block,
    and is copied out once: no VectorE add per contraction block. The operands stream in contraction blocks as in
    gemm_blocked; the moving operand is read once, the stationary one once per output block."""
    k_size, m_size = lhsT.shape
    _, n_size = rhs.shape
    assert m_size <= TILE_M, "gemm_psum holds one M tile per block"
    block_n, block_k = min(n_size, TILE_N * PSUM_BANKS), min(k_size, TILE_K * tiles_k)
    out = nl.ndarray((m_size, n_size), lhsT.dtype, buffer=nl.shared_hbm)
    for n0 in nl.affine_range(0, n_size, block_n):
        n_end = min(n_size, n0 + block_n)
        n_tiles = [(n, min(n_end, n + TILE_N)) for n in range(n0, n_end, TILE_N)]
        sums = [nl.ndarray((m_size, n1 - n), nl.float32, buffer=nl.psum) for n, n1 in n_tiles]
        for k0 in nl.sequential_range(0, k_size, block_k):
            k_tiles = [(k, min(k_size, k + TILE_K)) for k in range(k0, min(k_size, k0 + block_k), TILE_K)]
            lhs_block = nl.ndarray((TILE_K, len(k_tiles), m_size), lhsT.dtype, buffer=nl.sbuf)
            rhs_block = nl.ndarray((TILE_K, len(k_tiles), n_end - n0), rhs.dtype, buffer=nl.sbuf)
            for t, (k, k1) in enumerate(k_tiles):
                nisa.dma_copy(dst=lhs_block[:k1 - k, t, :], src=lhsT[k:k1, :])
                nisa.dma_copy(dst=rhs_block[:k1 - k, t, :], src=rhs[k:k1, n0:n_end])
            for partial, (n, n1) in zip(sums, n_tiles):
                for t, (k, k1) in enumerate(k_tiles):
                    nisa.nc_matmul(dst=partial, stationary=lhs_block[:k1 - k, t, :],
                                   moving=rhs_block[:k1 - k, t, n - n0:n1 - n0])
            del lhs_block, rhs_block   # free SBUF for the next block's operands
        staged = nl.ndarray((m_size, n_end - n0), out.dtype, buffer=nl.sbuf)
        for partial, (n, n1) in zip(sums, n_tiles):
            nisa.tensor_copy(dst=staged[:, n - n0:n1 - n0], src=partial)
        nisa.dma_copy(dst=out[:, n0:n_end], src=staged)
        del sums, partial, staged   # free the PSUM banks for the next output block
    return out


def compute_ns(report) -> float:
    """The kernel's time as the cost model's compute term should see it. A kernel bound by TensorE runs for its
    whole latency, DMA waits included (what no schedule hides: the tutorial's missing 15%). Any other kernel is
    bound by its operand traffic or its start-up latency (decode-sized and tiny GEMMs), which the cost model
    prices itself (an op costs the slower of its engines and its DMA, plus launches), so only its busiest compute
    engine counts here: TensorE, or VectorE evicting the PSUM sums."""
    if report.bottleneck == "tensor":
        return report.latency_ns
    return max(busy for engine, busy in report.engine_busy_ns.items() if engine != "dma")


def schedule(chip_name: str, stationary: int, contraction: int, moving: int, dtype: str):
    """(kernel, cycle-model report) of the faster kernel for the shape, as a tuned compiler picks its schedule per
    shape: gemm_blocked, or for a few stationary rows (one M tile) gemm_psum, which keeps each output tile's whole
    contraction in PSUM instead of adding contraction blocks on VectorE. Ties keep gemm_blocked."""
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = chip_name
    operands = (nki.ShapeOnly((contraction, stationary), dtype), nki.ShapeOnly((contraction, moving), dtype),
                TILES_K[dtype])
    kernels = (gemm_blocked, gemm_psum) if stationary <= TILE_M else (gemm_blocked,)
    runs = [(kernel, nki.benchmark(kernel, numerics=False)(*operands)) for kernel in kernels]
    return min(runs, key=lambda run: run[1].latency_ns)


def efficiency(chip_name: str, stationary: int, contraction: int, moving: int, dtype: str) -> float:
    """Tile-rule cycles over the cycle model's, for the GEMM on one NeuronCore of `chip_name`."""
    core = CHIPS[chip_name].core
    report = schedule(chip_name, stationary, contraction, moving, dtype)[1]
    fp32 = dtype == "float32"
    rule = tiles.gemm_cycles(stationary, contraction, moving, fp32, core.pe_array, core.fp32_matmul_slowdown)
    value = rule / (compute_ns(report) * core.clock_ghz["tensor"])
    if not 0 < value <= 1 + 1e-9:
        raise ValueError(f"{chip_name} {dtype} {(stationary, contraction, moving)}: efficiency {value:.4f} is outside "
                         "(0, 1]: the tile rule and the cycle model disagree on TensorE's own time")
    return min(1.0, value)


def shapes():
    return [(s, k, m) for s in STATIONARY for k in CONTRACTION for m in MOVING if s <= m]


def render(entries: dict, seconds: float) -> str:
    lines = ['"""GEMM efficiency per shape: tile-rule cycles (tiles.gemm_cycles) over the NKI cycle model\'s cycles for a',
             "well-blocked GEMM, per NeuronCore generation and input dtype. Generated by benchmarks/gemm_table.py",
             f"(in {seconds / 60:.0f} min); do not edit; costmodel/gemm_efficiency.py reads it. Per shape the faster of",
             "its two kernels, as a tuned compiler picks its schedule per shape: gemm_blocked, the NKI tutorial's",
             "blocked GEMM made general (contraction blocks added in SBUF on VectorE), and for <= 128 stationary rows",
             "gemm_psum (each output tile's whole contraction in PSUM).",
             "Keyed by (stationary, contraction, moving) free sizes, stationary <= moving: the kernel moves the operand",
             'with the larger free size; the tile rule takes the cheaper orientation, so m and n may be swapped."""',
             f"STATIONARY = {STATIONARY}",
             f"CONTRACTION = {CONTRACTION}",
             f"MOVING = {MOVING}",
             "# (chip, fp32 inputs) -> {(stationary, contraction, moving): efficiency}",
             "TABLE = {"]
    for (chip_name, dtype), table in entries.items():
        lines.append(f"    ({chip_name!r}, {dtype == 'float32'}): {{")
        lines += [f"        {shape}: {value:.4f}," for shape, value in table.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    started = time.perf_counter()
    entries = {}
    for chip_name in CHIPS:
        for dtype in DTYPES:
            begun = time.perf_counter()
            entries[chip_name, dtype] = {shape: efficiency(chip_name, *shape, dtype) for shape in shapes()}
            values = entries[chip_name, dtype].values()
            print(f"{chip_name} {dtype}: {len(values)} shapes, efficiency {min(values):.3f}..{max(values):.3f}, "
                  f"{time.perf_counter() - begun:.0f} s", flush=True)
    seconds = time.perf_counter() - started
    TABLE.write_text(render(entries, seconds))
    print(f"wrote {TABLE.relative_to(ROOT)} in {seconds:.0f} s")


if __name__ == "__main__":
    main()
