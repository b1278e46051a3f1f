"""The op records (localneuron/ops/op_records.py): every key is a real dispatcher op, special entries
say why, the device really does what each record says, and `localneuron info --ops` prints them."""

import pytest
import torch
import torch.distributed._functional_collectives  # noqa: F401  (defines _c10d_functional::_wrap_tensor_autograd)

from localneuron.ops import op_records
from localneuron.ops.op_records import OPS, WHOLE, WHOLE_INCLUDING_OUT, Decompose, OnHost

ALL_OPS = set(torch._C._dispatch_get_all_op_names())
ALL_NAMES = {q.partition(".")[0] for q in ALL_OPS}


def overloads(key: str) -> list[str]:
    return [key] if "." in key else sorted(q for q in ALL_OPS if q == key or q.startswith(key + "."))


@pytest.mark.parametrize("key", sorted(OPS))
def test_every_key_is_a_dispatcher_op(key):
    collective = ((OPS[key].collective is not None or OPS[key].collective_result)
                  and key.startswith(("c10d::", "_c10d_functional::")))
    assert key.startswith("aten::") or collective
    assert (key in ALL_OPS) if "." in key else (key in ALL_NAMES), f"{key} is not a dispatcher operator of torch 2.13"


def test_estimate_reads_healthy_values_and_collectives_from_the_records():
    from localneuron.estimate import script

    assert set(script.HEALTHY_READS) == {op for op, r in OPS.items() if r.healthy_read}
    assert set(script.HEALTHY_RULES) == {r.healthy_read for r in OPS.values() if r.healthy_read}
    assert set(script.COLLECTIVE_RESULTS) == {op for op, r in OPS.items() if r.collective_result} == {
        "_c10d_functional::wait_tensor", "_c10d_functional::_wrap_tensor_autograd"}
    assert script.HEALTHY_READS["aten::isfinite"](()) is True and script.HEALTHY_READS["aten::isnan"](()) is False
    assert script.COLLECTIVES == {op: r.collective for op, r in OPS.items() if r.collective is not None}
    assert script.COLLECTIVES["c10d::_allgather_base_"] == op_records.Collective("all_gather", op_records.OUTPUTS)
    assert all(r.collective.counted in (op_records.INPUTS, op_records.OUTPUTS) for r in OPS.values() if r.collective)


def test_special_records_say_why():
    for key, r in OPS.items():
        special = r.run is not None or r.writes or r.fallback_dtypes
        assert r.why or not special, f"{key}: a special record needs a reason"
        assert r.support in (None, op_records.NATIVE, op_records.CPU_FALLBACK), key
        assert r.quirk is None or r.quirk.quirk, key


def test_decomposed_ops_have_device_kernels():
    on_host = 0
    for key, r in OPS.items():
        if isinstance(r.run, Decompose):
            for dispatch_key in ("PrivateUse1", "AutogradPrivateUse1"):
                registered = torch._C._dispatch_has_kernel_for_dispatch_key(key, dispatch_key)
                assert registered == (dispatch_key in r.run.keys), (key, dispatch_key)
        if isinstance(r.run, OnHost):  # the executor's kernel, which runs the record's kernel as one executable
            assert torch._C._dispatch_has_kernel_for_dispatch_key(key, "PrivateUse1"), key
            on_host += 1
    assert on_host == 7  # SyncBatchNorm's kernels and _fused_rms_norm_backward


def test_whole_ops_are_routed_to_the_executor():
    routed = 0
    for key, r in OPS.items():
        if r.run not in (WHOLE, WHOLE_INCLUDING_OUT):
            continue
        for qualified in overloads(key):
            overload = qualified.partition(".")[2]
            composite = torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutograd")
            if composite and (r.run == WHOLE_INCLUDING_OUT or not overload.endswith("out")):
                assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"), qualified
                routed += 1
    assert routed > 50


def test_derived_views_follow_the_records():
    assert op_records.OP_SUPPORT["aten::mm"] == op_records.NATIVE
    assert op_records.OP_SUPPORT["aten::uniform_"] == op_records.CPU_FALLBACK
    assert "aten::gather" in op_records.INDEX_OPS and "aten::add" not in op_records.INDEX_OPS
    assert op_records.HOST_KERNEL_FIXES["aten::histc"] is OPS["aten::histc"].quirk
    assert "enable_nested_tensor=False" in op_records.UNSUPPORTED["aten::_nested_tensor_from_mask"]
    assert op_records.record("aten::mm", "dtype").run.fn.__name__ == "mm_dtype"
    assert op_records.record("aten::mm", "default") is OPS["aten::mm"]


def test_queueing_fusion_and_estimate_read_their_sets_from_the_records():
    from localneuron.adaptive_eager import fusible_ops
    from localneuron.ops import queueing

    assert queueing.SHAPE_FROM_SCALARS == {op: r.shape_from_scalars for op, r in OPS.items() if r.shape_from_scalars}
    assert set(queueing.SHAPE_FROM_SCALARS) == {"aten::arange", "aten::range"}
    assert "aten::einsum" in queueing.SHAPE_FROM_FLOAT_OR_STRING
    assert set(queueing.INT_RESULTS_FROM_SHAPES) == set(queueing.SEEDED_TAG_WITHOUT_DRAWS) == {
        "aten::_scaled_dot_product_fused_attention_overrideable"}
    assert queueing.REALLOCATING_INPLACE_VIEWS == {"aten::resize_", "aten::resize_as_", "aten::set_"}
    assert all(why for why in queueing.QUEUED_FALLBACKS.values())
    assert fusible_ops.FUSIBLE_OPS["aten::add.Tensor"] == op_records.NUMBERS_FLOAT32
    assert fusible_ops.FUSIBLE_OPS["aten::rsqrt"] == op_records.FLOAT32
    assert fusible_ops.ONLY_WITH == {"aten::add.Tensor": ("alpha", 1), "aten::sub.Tensor": ("alpha", 1),
                                     "aten::pow.Tensor_Scalar": ("exponent", 2)}
    from localneuron.costmodel.ops import COPY, NOTHING
    from localneuron.estimate.trace import ISSUED

    assert ISSUED == {op: r.issued for op, r in OPS.items() if r.issued}
    assert ISSUED["aten::_to_copy"] == COPY and ISSUED["aten::_unsafe_view"] == NOTHING
    for key, r in OPS.items():
        for f in r.fusible:
            assert f.dtypes in (op_records.ANY, op_records.FLOAT32, op_records.NUMBERS_FLOAT32), key
            qualified = f"{key}.{f.overload}" if f.overload else key
            assert qualified in ALL_OPS, qualified


def test_the_unboxed_fast_path_got_exactly_the_records_fast_ops():
    """registration hands the records' `fast` fields to C++ (csrc/executor/fast_ops.cpp), which registers an
    unboxed kernel for each and for nothing else."""
    from localneuron import _C

    expected = {f"{op}.{r.fast.overload}" if r.fast.overload else op for op, r in OPS.items() if r.fast}
    assert "aten::add.Tensor" in expected and "aten::mm" in expected
    assert sorted(_C.fast_ops()) == sorted(expected)
    for key, r in OPS.items():
        if r.fast is not None:
            out = f"{key}.{r.fast.out}"
            assert out in ALL_OPS, out
            assert r.fast.form in (op_records.UNARY, op_records.TENSOR_SCALAR, op_records.BINARY,
                                   op_records.BINARY_ALPHA, op_records.BINARY_IN_PLACE,
                                   op_records.BINARY_ALPHA_IN_PLACE), key
            in_place = r.fast.form in (op_records.BINARY_IN_PLACE, op_records.BINARY_ALPHA_IN_PLACE)
            assert in_place == (key.endswith("_") and r.fast.out == r.fast.overload), key  # runs the op itself


def test_an_unknown_fast_form_is_refused_by_name():
    from localneuron import _C
    from localneuron.device import registration

    contract = {**registration.executor_contract(), "fast_ops": [("aten::add", "Tensor", "out", "ternary")]}
    with pytest.raises(RuntimeError, match="aten::add has the unknown form 'ternary'"):
        _C.install_executor(**contract)




def test_info_ops_prints_matching_records(capsys):
    from localneuron.cli.main import main

    def info_ops(*pattern) -> str:  # the command in this process: it prints records, it runs no op
        assert main(["info", "--ops", *pattern]) == 0
        return capsys.readouterr().out

    lines = info_ops("fused_lstm").splitlines()
    assert lines[0].startswith("aten::_thnn_fused_lstm_cell: support=unlisted; run=decompose(fused_lstm_cell)")
    assert all("fused_lstm" in line for line in lines)
    histc = info_ops("aten::histc")
    assert histc.startswith("aten::histc: support=native; quirk=") and "integer" in histc
    assert len(info_ops().splitlines()) == len(OPS)
    assert "no op record matches" in info_ops("no_such_op")


def test_the_cost_model_prices_each_op_by_its_record(monkeypatch):
    from pathlib import Path

    from localneuron.costmodel import engines
    from localneuron.costmodel.hardware import chip

    rules = (engines.Matmul, engines.Attention, engines.Rows, engines.Elementwise, engines.Reduction,
             engines.Movement, engines.Free)
    assert all(r.cost is None or isinstance(r.cost, rules) for r in OPS.values())
    assert OPS["aten::mm"].cost == engines.Matmul("mm") and OPS["aten::_softmax"].cost == engines.Rows(vector=2, scalar=1)
    # no second table: the cost model's sources name no op (only its docstrings give an example)
    for source in Path(engines.__file__).parent.glob("*.py"):
        code = [line for line in source.read_text().splitlines() if '"aten::' in line and "(\"aten::mm\")" not in line
                and "rules:" not in line]
        assert not code, (source.name, code)
    a, b = torch.empty(64, 128, device="meta"), torch.empty(128, 32, device="meta")
    target = chip("trn2")
    assert engines.op_work(target, "aten::mm", [a, b], [a]).engine_s["tensor"] > 0
    monkeypatch.setattr(engines, "_rules", {**op_records.COST_RULES, "aten::mm": engines.FREE})
    assert engines.op_work(target, "aten::mm", [a, b], [a]).compute_s == 0.0
