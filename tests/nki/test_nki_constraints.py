"""Every instruction constraint raises NkiConstraintError naming the parameter and the limit."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl

X = np.ones((256, 1024), dtype=np.float32)


def sb(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.sbuf)


def ps(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.psum)


def fails(body, *fragments, target="gen3", monkeypatch=None):
    """Run `body(hbm_input)` inside a kernel; it must fail with every fragment in the message."""
    @nki.jit
    def kernel(a):
        body(a)
    with pytest.raises(nki.NkiConstraintError) as error:
        nki.simulate(kernel)(X)
    for fragment in fragments:
        assert fragment in str(error.value), f"{fragment!r} not in {error.value}"


@pytest.fixture(autouse=True)
def gen3(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")


CASES = {
    "partition dimension at allocation": (lambda a: sb((256, 4)), ("256", "pmax=128")),
    "partition count of a view": (
        lambda a: nisa.dma_copy(dst=sb((128, 4)), src=a[0:129, 0:4]), ("dst has 512 elements", "src has 516")),
    "stationary free size": (
        lambda a: nisa.nc_matmul(dst=ps((128, 512)), stationary=sb((128, 129)), moving=sb((128, 512))),
        ("stationary free size is 129", "gemm_stationary_fmax=128")),
    "moving free size": (
        lambda a: nisa.nc_matmul(dst=ps((128, 1024)), stationary=sb((128, 128)), moving=sb((128, 1024))),
        ("moving free size is 1024", "gemm_moving_fmax=512")),
    "contraction mismatch": (
        lambda a: nisa.nc_matmul(dst=ps((128, 512)), stationary=sb((128, 128)), moving=sb((64, 512))),
        ("stationary has 128 partitions but moving has 64",)),
    "psum bank crossing": (
        lambda a: nisa.nc_matmul(dst=ps((128, 1024))[:, 256:768], stationary=sb((128, 128)), moving=sb((128, 512))),
        ("dst", "crossing a PSUM bank boundary", "2048-byte bank")),
    "matmul output in SBUF": (
        lambda a: nisa.nc_matmul(dst=sb((128, 512)), stationary=sb((128, 128)), moving=sb((128, 512))),
        ("dst is in SBUF", "Tensor engine can only write PSUM")),
    "matmul input in PSUM": (
        lambda a: nisa.nc_matmul(dst=ps((128, 512)), stationary=sb((128, 128)), moving=ps((128, 512))),
        ("moving is in PSUM", "Tensor engine can only read SBUF")),
    "matmul integer input": (
        lambda a: nisa.nc_matmul(dst=ps((128, 512)), stationary=sb((128, 128), nl.int32), moving=sb((128, 512), nl.int32)),
        ("stationary dtype int32",)),
    "matmul fp32 mixed with bf16": (
        lambda a: nisa.nc_matmul(dst=ps((128, 512)), stationary=sb((128, 128)), moving=sb((128, 512), nl.bfloat16)),
        ("stationary is float32 but moving is bfloat16",)),
    "bf16 psum output before gen4": (
        lambda a: nisa.nc_matmul(dst=ps((128, 512), nl.bfloat16), stationary=sb((128, 128)), moving=sb((128, 512))),
        ("dst dtype bfloat16", "gen3")),
    "gpsimd reads psum": (
        lambda a: nisa.tensor_copy(dst=sb((128, 64)), src=ps((128, 64)), engine=nisa.engine.gpsimd),
        ("src is in PSUM", "GpSimd engine can only read SBUF")),
    "dma reads psum": (
        lambda a: nisa.dma_copy(dst=sb((128, 64)), src=ps((128, 64))), ("src is in PSUM", "tensor_copy")),
    "compute engine touches hbm": (
        lambda a: nisa.tensor_copy(dst=sb((128, 64)), src=a[0:128, 0:64]), ("src is in HBM", "Vector engine")),
    "both tensor_tensor operands in psum": (
        lambda a: nisa.tensor_tensor(dst=sb((128, 64)), data1=ps((128, 64)), data2=ps((128, 64)), op=nl.add),
        ("both in PSUM", "at most one")),
    "operand layout mismatch": (
        lambda a: nisa.tensor_tensor(dst=sb((128, 64)), data1=sb((128, 64)), data2=sb((64, 64)), op=nl.add),
        ("data1 has 128 partitions but data2 has 64",)),
    "start partition for 33..64 partitions": (
        lambda a: nisa.tensor_copy(dst=sb((128, 8))[32:96], src=sb((64, 8))),
        ("dst starts at partition 32", "64-partition access must start at partition 0 or 64")),
    "start partition for more than 64 partitions": (
        lambda a: nisa.memset(dst=sb((128, 8))[1:128], value=0.0),
        ("dst starts at partition 1", "must start at partition 0")),
    "start partition for at most 32 partitions": (
        lambda a: nisa.memset(dst=sb((128, 8))[16:32], value=0.0),
        ("starts at partition 16", "0 or 32 or 64 or 96")),
    "reduce over partitions": (
        lambda a: nisa.tensor_reduce(dst=sb((1, 64)), op=nl.add, data=sb((128, 64)), axis=0),
        ("axis 0 is the partition dimension",)),
    "bitwise op on floats": (
        lambda a: nisa.tensor_tensor(dst=sb((128, 8)), data1=sb((128, 8)), data2=sb((128, 8)), op=nl.bitwise_and),
        ("data1 dtype float32", "integer")),
    "op not on engine": (
        lambda a: nisa.tensor_tensor(dst=sb((128, 8)), data1=sb((128, 8)), data2=sb((128, 8)), op=nl.divide,
                                     engine=nisa.engine.gpsimd),
        ("op=nl.divide is not supported on the gpsimd engine",)),
    "scalar engine tensor_scalar form": (
        lambda a: nisa.tensor_scalar(dst=sb((128, 8)), data=sb((128, 8)), op0=nl.add, operand0=1.0, op1=nl.multiply,
                                     operand1=2.0, engine=nisa.engine.scalar),
        ("Scalar engine supports only multiply+add",)),
    "vector operand shape": (
        lambda a: nisa.tensor_scalar(dst=sb((128, 8)), data=sb((128, 8)), op0=nl.add, operand0=sb((128, 2))),
        ("operand0 must be a [128, 1] tile",)),
    "vector transpose size": (
        lambda a: nisa.nc_transpose(dst=sb((64, 64)), data=sb((64, 64)), engine=nisa.engine.vector),
        ("data is [64, 64]", "at most [32, 32]")),
    "affine_select on 32-bit integers": (
        lambda a: nisa.affine_select(dst=sb((128, 8), nl.int32), pattern=[[1, 8]], offset=0, channel_multiplier=0,
                                     on_true_tile=sb((128, 8), nl.int32), on_false_value=0.0),
        ("dst dtype int32", "8/16-bit integer")),
    "tensor_scalar mixing bitvec and arithmetic": (
        lambda a: nisa.tensor_scalar(dst=sb((128, 8), nl.int32), data=sb((128, 8), nl.int32), op0=nl.bitwise_and,
                                     operand0=3, op1=nl.add, operand1=1.0),
        ("op0=nl.bitwise_and and op1=nl.add must both be bitvec or both arithmetic",)),
    "scalar_tensor_tensor comparison operator": (
        lambda a: nisa.scalar_tensor_tensor(dst=sb((128, 8)), data=sb((128, 8)), op0=nl.greater, operand0=0.0,
                                            op1=nl.multiply, operand1=sb((128, 8))),
        ("op0=nl.greater must be an arithmetic operator",)),
    "tensor_scalar_reduce reduce_op": (
        lambda a: nisa.tensor_scalar_reduce(dst=sb((128, 8)), data=sb((128, 8)), op0=nl.add, operand0=1.0,
                                            reduce_op=nl.divide, reduce_res=sb((128, 1))),
        ("reduce_op=nl.divide is not supported",)),
    "exponential before gen4": (
        lambda a: nisa.exponential(dst=sb((128, 8)), src=sb((128, 8))), ("needs gen4", "gen3")),
    "dma element count": (
        lambda a: nisa.dma_copy(dst=sb((128, 64)), src=a[0:128, 0:32]), ("dst has 8192 elements but src has 4096",)),
    "accumulate onto memset psum": (
        lambda a: (lambda acc: (nisa.memset(dst=acc, value=0.0),
                                nisa.nc_matmul(dst=acc, stationary=sb((128, 128)), moving=sb((128, 512)), accumulate=True)))(
            ps((128, 512))),
        ("accumulate=True", "undefined on gen3")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_constraint_error_names_parameter_and_limit(name):
    body, fragments = CASES[name]
    fails(body, *fragments)


def test_gen2_specific_rules(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    fails(lambda a: nisa.tensor_scalar(dst=sb((128, 8)), data=sb((128, 8)), op0=nl.add, operand0=1.0,
                                       engine=nisa.engine.scalar), "Scalar engine runs ALU operators from gen3", "gen2")
    fails(lambda a: nisa.activation(dst=sb((128, 8)), op=nl.exp, data=sb((128, 8)), bias=1.0),
          "bias must be a [128, 1] tile on gen2")


def test_gen4_allows_wide_moving_tiles(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")

    @nki.jit
    def wide(a):
        out = nl.ndarray((128, 2048), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=out, stationary=sb((128, 128)), moving=sb((128, 2048)))
    nki.benchmark(wide, numerics=False)(nki.ShapeOnly((1,)))
    fails(lambda a: nisa.nc_matmul(dst=ps((128, 4096)), stationary=sb((128, 128)), moving=sb((128, 8192))),
          "moving free size is 8192", "gemm_moving_fmax=4096 on gen4")


def test_usage_errors_are_explicit():
    with pytest.raises(nki.NkiUsageError, match="platform_target"):
        nki.jit(platform_target="trn2")(lambda a: a)
    with pytest.raises(nki.NkiUsageError, match="not the string 'sbuf'"):
        nki.simulate(lambda a: nl.ndarray((1, 1), nl.float32, buffer="sbuf"))(X)
    with pytest.raises(nki.NkiUsageError, match="inside a kernel"):
        nl.ndarray((1, 1), nl.float32)
    with pytest.raises(nki.NkiUsageError, match="activation function"):
        nki.simulate(lambda a: nisa.activation(dst=sb((1, 1)), op=nl.add, data=sb((1, 1))))(X)
