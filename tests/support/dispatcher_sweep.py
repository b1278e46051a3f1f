"""Dispatcher-surface sweep: every ATen overload with a CPU kernel, called with inputs built from its
schema, on CPU and on ``neuron``, compared.

An overload is swept when the dispatcher has a CPU kernel for it (CPU, or a CompositeImplicit/Explicit
kernel that serves the CPU). For each dtype of DTYPES, tests/support/schema_inputs.py proposes calls in order;
the first one the CPU runs is the call for that dtype (none: "no valid generated call" for that dtype).
Its inputs, copied to ``neuron`` beforehand (the CPU may mutate them), then run on the device, and the
results are compared with the CPU's (tests/support/sweep_compare.py: values, dtypes, shapes, device), and so are
the tensor arguments afterwards (in-place and out= mutations). Both sides run under the same
torch.manual_seed: a draw on neuron takes the CPU generator's values (localneuron/device/random.py), so random
ops are compared on values too, except RNG_STREAM_DIFFERS (compared on shape, dtype and moments). Results
holding uninitialized memory are compared on shape and dtype: by name (UNINITIALIZED_*), and any result that
differs between two CPU runs of the same call.

Per overload: pass (every dtype with a valid call matched), fail (a mismatch or an error on neuron, or
the worker crashed / hung on it on the device side: "crash"), skip (with the reason: no generator for an
argument type, no valid generated call in any dtype, the CPU kernel itself crashed on the generated
call, SKIPS, or the total time budget ran out).

Crash isolation and time budgets: tests/support/sweep_pool.py (per op: OP_TIMEOUT_S in a worker, OP_BUDGET_S of
tries inside it; total: --budget).

Usage: python tests/support/dispatcher_sweep.py [--ops aten::add.Tensor,...] [--fast] [--workers N] [--budget S]
                                        [--json out.json] [--markdown docs/dispatcher-sweep.md]
                                        [--write-expected] [--failures-only]
"""
import argparse
import gc
import json
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expected_status  # noqa: E402
import schema_inputs  # noqa: E402
import sweep_compare  # noqa: E402
import sweep_pool  # noqa: E402

DTYPE_NAMES = ("float32", "bfloat16", "float16", "int64", "bool")
SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int64": "i64", "bool": "b8"}
CPU_KERNEL_KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                   "CompositeExplicitAutogradNonFunctional")
OP_TIMEOUT_S = float(os.environ.get("DISPATCHER_SWEEP_OP_TIMEOUT", "60"))
OP_BUDGET_S = 10.0  # tries of one overload (all dtypes) stop after this; the worker timeout is the hard limit
TOTAL_BUDGET_S = float(os.environ.get("DISPATCHER_SWEEP_BUDGET", "3600"))
MAX_CANDIDATES = 48  # calls tried per dtype before "no valid generated call"
SEED = 1234
CPU_ONLY = False  # the control worker (--cpu-only): the CPU side of every call, no device
EXPECTED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected", "dispatcher_status.py")

# Overloads not swept at all, with the reason.
SKIPS: dict[str, str] = {
    "aten::_add_batch_dim": "functorch internal: returns a BatchedTensor, meaningful only inside vmap",
}

# Random ops whose device stream legitimately differs from the CPU's: compared on shape, dtype, moments.
RNG_STREAM_DIFFERS: dict[str, str] = {
}

UNINITIALIZED_NAME_PARTS = ("empty",)  # outputs hold uninitialized memory: shape and dtype only
# Result leaves (indices into outputs + tensor arguments) that hold uninitialized memory: shape and dtype only.
UNINITIALIZED_OUTPUTS: dict[str, tuple[tuple[int, ...], str]] = {
    "aten::_make_dep_token": ((0,), "an empty scalar tensor used as a token"),
    "aten::_scaled_dot_product_fused_attention_overrideable": ((6, 7), "philox seed / offset: empty tensors"),
}
# CPU kernels that leave outputs unwritten on the (shape-inconsistent) generated inputs; two CPU runs can
# read the same stale memory, so the automatic detection below does not always see it.
UNWRITTEN_ON_GENERATED_INPUTS: dict[str, str] = {
    "aten::_weight_norm_interface": "g of the input's shape instead of per-dim norms: the norms output is stale",
    "aten::_weight_norm_interface.out": "g of the input's shape instead of per-dim norms: the norms output is stale",
    "aten::embedding_bag": "2-D input with offsets: bags read past the indices",
    "aten::_embedding_bag_forward_only": "2-D input with offsets: bags read past the indices",
    "aten::_embedding_bag_forward_only.out": "2-D input with offsets: bags read past the indices",
    "aten::_dyn_quant_matmul_4bit": "plain floats as packed 4-bit weights: the kernel reads past them",
    "aten::mkldnn_rnn_layer": "weights sized like the input: the kernel reads past them",
    "aten::mkldnn_rnn_layer.out": "weights sized like the input: the kernel reads past them",
}
# Values that depend on the device by definition: compared on type only.
DEVICE_DEPENDENT: dict[str, str] = {
    "aten::get_device": "the device index (-1 on the CPU)",
}
# Ops whose tensor results are on the CPU whatever the inputs' device.
CPU_RESULTS: dict[str, str] = {
    "aten::_shape_as_tensor": "the shape as a CPU tensor (metadata)",
    "aten::_to_cpu": "copies to the CPU by definition",
    "aten::choose_qparams_optimized": "quantization parameters are computed into CPU tensors",
    "aten::fbgemm_pack_gemm_matrix_fp16": "FBGEMM packs the weight into a CPU buffer",
    "aten::_test_ambiguous_defaults.a": "a dispatcher test op returning a new CPU tensor",
    "aten::_test_ambiguous_defaults.b": "a dispatcher test op returning a new CPU tensor",
}
# Arguments that ATen requires on the CPU whatever the device: op -> argument names.
KEEP_ON_CPU: dict[str, tuple[str, ...]] = {
    "aten::randint_like.Tensor": ("high",),  # "high must be a scalar tensor and on CPU"
    "aten::tensor_split.tensor_indices_or_sections": ("tensor_indices_or_sections",),  # "... to be on cpu"
    "aten::randint_like.Tensor_out": ("high",),
    "aten::randint_like.Tensor_generator": ("high",),
    "aten::randint_like.Tensor_generator_out": ("high",),
}

# The default (fast) tier: every FAST_STRIDE-th swept overload, plus the overloads behind known failure
# classes (issue 9), so a regression in any of them shows without the full sweep.
FAST_STRIDE = 25
FAST_NAMED = (
    "aten::histc", "aten::mode", "aten::kaiser_window", "aten::lstm_cell", "aten::gru_cell", "aten::gcd",
    "aten::logit_backward", "aten::_embedding_bag", "aten::grid_sampler_2d_backward", "aten::_efficientzerotensor",
    "aten::tensor_split.tensor_indices_or_sections", "aten::index_put_", "aten::add.Tensor", "aten::add_.Tensor",
    "aten::add.out", "aten::max.dim", "aten::bernoulli", "aten::randn", "aten::normal.Tensor_float",
    "aten::native_batch_norm", "aten::_fused_sgd_", "aten::_stack.out", "aten::_lazy_clone", "aten::set_",
    "aten::sparse_csr_tensor.crow_col_value", "aten::_nested_tensor_from_tensor_list", "aten::grid_sampler_3d",
)


def all_overloads() -> list[str]:
    import torch

    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))


def has_cpu_kernel(name: str) -> bool:
    import torch

    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k) for k in CPU_KERNEL_KEYS)


def swept_overloads() -> list[str]:
    return [n for n in all_overloads() if has_cpu_kernel(n)]


def fast_overloads() -> list[str]:
    swept = swept_overloads()
    named = set(FAST_NAMED) & set(swept)
    return [n for i, n in enumerate(swept) if i % FAST_STRIDE == 0 or n in named]


def _split(full: str) -> tuple[str, str]:
    name, _, overload = full.partition(".")
    return name, overload


def resolve(full: str):
    import torch

    name, overload = _split(full)
    packet = getattr(torch.ops.aten, name[len("aten::"):])
    return getattr(packet, overload or "default")


# ----------------------------------------------------------------------------------------------------
# worker side


def _describe(obj) -> str:
    import torch

    if isinstance(obj, torch.Tensor):
        return f"{SHORT.get(str(obj.dtype).split('.')[1], str(obj.dtype).split('.')[1])}{list(obj.shape)}"
    if isinstance(obj, (list, tuple)):
        return "[" + ", ".join(_describe(x) for x in obj) + "]"
    return repr(obj)


def describe_call(args, kwargs) -> str:
    return "(" + ", ".join([_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]) + ")"


def _moments_match(cpu_out, dev_out):
    """Random ops with another stream: same shapes/dtypes (checked by compare) and similar mean/std."""
    import torch

    for c, d in zip(sweep_compare.flatten(cpu_out), sweep_compare.flatten(dev_out)):
        if isinstance(c, torch.Tensor) and c.is_floating_point() and c.numel() > 1:
            c, d = c.double(), d.to("cpu").double()
            scale = float(c.std()) + 1e-3
            if abs(float(c.mean()) - float(d.mean())) > 3 * scale or abs(float(c.std()) - float(d.std())) > 3 * scale:
                raise AssertionError(f"moments differ: mean {float(d.mean()):.3g} vs CPU {float(c.mean()):.3g}")


def _tensors(obj) -> list:
    import torch

    return [t for t in sweep_compare.flatten(obj) if isinstance(t, torch.Tensor)]


def _compared_tensors(schema, args, kwargs, keep) -> list:
    """The tensor arguments whose contents after the call are compared (mutations), minus those kept on
    the CPU."""
    named = [(schema.arguments[j].name, a) for j, a in enumerate(args)] + list(kwargs.items())
    return _tensors([a for name, a in named if name not in keep])


def _irreproducible_leaves(first, second) -> set[int]:
    """Leaves of two CPU runs of the same call that differ: uninitialized memory, not a function of the
    inputs (e.g. parts of an output that an invalid generated input leaves unwritten)."""
    import torch

    differ = set()
    for j, (x, y) in enumerate(zip(sweep_compare.flatten(first), sweep_compare.flatten(second))):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.layout == torch.strided \
                and not x.is_nested and x.shape == y.shape:
            try:
                torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)
            except AssertionError:
                differ.add(j)
    return differ


def run_dtype(op, full, schema, dtype_name, deadline, functional=None) -> dict:
    """The first generated call the CPU runs, run on neuron too and compared."""
    import torch
    import torch_neuronx

    dtype = getattr(torch, dtype_name)
    values = not any(p in full for p in UNINITIALIZED_NAME_PARTS) and full not in RNG_STREAM_DIFFERS \
        and full not in DEVICE_DEPENDENT and full not in UNWRITTEN_ON_GENERATED_INPUTS
    shape_only = set(UNINITIALIZED_OUTPUTS.get(full, ((),))[0])
    keep = KEEP_ON_CPU.get(full, ())
    tol = sweep_compare.tolerance(_split(full)[0][len("aten::"):], dtype_name)
    low = dtype in (torch.bfloat16, torch.float16)
    cpu_error = None
    for i, (args, kwargs) in enumerate(schema_inputs.candidate_calls(schema, dtype, functional)):
        if i >= MAX_CANDIDATES or time.time() > deadline:
            break
        if args is None:  # refused while generating it (kwargs: the exception)
            cpu_error = cpu_error or sweep_pool.first_line(kwargs)
            continue
        call = describe_call(args, kwargs)
        dev_args = [a.clone() if schema.arguments[j].name in keep else sweep_compare.to_neuron(a)
                    for j, a in enumerate(args)]
        dev_kwargs = {k: v.clone() if k in keep else sweep_compare.to_neuron(v) for k, v in kwargs.items()}
        again = sweep_compare.clone(args), sweep_compare.clone(kwargs)
        ref_in = (sweep_compare.upcast(args), sweep_compare.upcast(kwargs)) if low and values else None
        sweep_pool.note(f"{dtype_name} CPU call {call}")
        try:
            torch.manual_seed(SEED)
            cpu_out = op(*args, **kwargs)
            # A result the CPU itself cannot materialize (e.g. a negative view of bools) is no valid call.
            _ = [t.clone() for t in _tensors(cpu_out) if t.layout == torch.strided and not t.is_nested]
        except Exception as e:  # noqa: BLE001  (not a valid call: try the next candidate)
            cpu_error = cpu_error or sweep_pool.first_line(e)
            continue
        cpu_result = (cpu_out, _compared_tensors(schema, args, kwargs, keep))
        if values:
            # Memory freed by the first run is refilled before the second, so that an output the kernel
            # leaves unwritten reads differently (the allocator hands the same blocks back).
            _ = [torch.full((n,), 12345.0) for n in (1, 2, 4, 9, 16, 18, 27, 36, 64, 256, 1024, 4096)]
            del _
            torch.manual_seed(SEED)
            second = op(*again[0], **again[1])
            shape_only |= _irreproducible_leaves(cpu_result, (second, _compared_tensors(schema, *again, keep)))
        if CPU_ONLY:
            del cpu_out, cpu_result, args, kwargs, again
            gc.collect()
            _ = [torch.ones(n) for n in range(64)]  # lets the allocator notice a corrupted heap, as the device run would
            return {"status": "match", "call": call}
        sweep_pool.note(f"{dtype_name} neuron call {call}")
        torch_neuronx.clear_op_tracking()
        result = {"status": "match", "call": call}
        if shape_only - set(UNINITIALIZED_OUTPUTS.get(full, ((),))[0]):
            result["notes"] = [f"leaves {sorted(shape_only)} differ between two CPU runs: shape and dtype only"]
        compare_kw = {"on_device": full not in CPU_RESULTS, "shape_only": shape_only}
        try:
            torch.manual_seed(SEED)
            dev_out = op(*dev_args, **dev_kwargs)
            torch_neuronx.synchronize()
            sweep_pool.note(f"{dtype_name} compare {call}")
            dev_result = (dev_out, _compared_tensors(schema, dev_args, dev_kwargs, keep))
            try:
                notes = sweep_compare.compare(cpu_result, dev_result, tol, values, **compare_kw)
            except AssertionError:
                if ref_in is None:
                    raise
                ref = op(*ref_in[0], **ref_in[1])
                ref_result = (ref, _compared_tensors(schema, *ref_in, keep))
                notes = sweep_compare.compare(cpu_result, dev_result, tol, values, ref_out=ref_result, **compare_kw)
            if full in RNG_STREAM_DIFFERS:
                _moments_match(cpu_out, dev_out)
            if notes:
                result["notes"] = result.get("notes", []) + sorted(set(notes))
        except AssertionError as e:
            result.update(status="mismatch", error=sweep_pool.first_line(e))
        except Exception as e:  # noqa: BLE001
            result.update(status="error", error=sweep_pool.first_line(e))
        fallback = sorted(torch_neuronx.get_fallback_ops())
        if fallback:
            result["fallback_ops"] = fallback
        return result
    if time.time() > deadline:
        return {"status": "no-call", "error": f"per-op budget of {OP_BUDGET_S:.0f} s spent"}
    return {"status": "no-call", "error": cpu_error or "no candidate call"}


def run_overload(full: str) -> dict:
    import torch

    name, overload = _split(full)
    try:
        schema = torch._C._get_schema(name, overload)
        op = resolve(full)
    except Exception as e:  # noqa: BLE001
        return {"op": full, "status": "skip", "reason": "no callable schema: " + sweep_pool.first_line(e)}
    problem = schema_inputs.arguments_problem(schema)
    if problem:
        return {"op": full, "status": "skip", "reason": "not constructible: " + problem}
    functional = None
    if any(schema_inputs.is_out(a) for a in schema.arguments):
        siblings = torch._C._jit_get_schemas_for_operator(name)
        sibling = schema_inputs.functional_sibling(schema, siblings)
        if sibling is not None:
            functional_op = resolve(name + ("." + sibling.overload_name if sibling.overload_name else ""))

            def functional(*args, **kwargs):
                sweep_pool.note(f"CPU call of {functional_op} (the out= dtypes) {describe_call(args, kwargs)}")
                return functional_op(*args, **kwargs)
    deadline = time.time() + OP_BUDGET_S
    dtypes = {d: run_dtype(op, full, schema, d, deadline, functional) for d in DTYPE_NAMES}
    record = {"op": full, "dtypes": dtypes}
    failed = [(d, r) for d, r in dtypes.items() if r["status"] in ("mismatch", "error")]
    if failed:
        d, r = failed[0]
        record.update(status="fail", error=f"[{d}] {r['error']} {r['call']}")
    elif any(r["status"] == "match" for r in dtypes.values()):
        record["status"] = "pass"
    else:
        record.update(status="skip", reason="no valid generated call: " + dtypes["float32"]["error"])
    return record


def worker_main(cpu_only: bool) -> None:
    import warnings

    global CPU_ONLY
    CPU_ONLY = cpu_only
    warnings.simplefilter("ignore")
    import torch_neuronx  # noqa: F401  (the device)

    warnings.simplefilter("ignore")
    sweep_pool.serve(run_overload, hang_seconds=10 * OP_TIMEOUT_S, device_faults=not cpu_only)


# ----------------------------------------------------------------------------------------------------
# parent side


def _cpu_side(record) -> bool:
    """The worker died in a CPU call (see run_dtype's notes)."""
    return "CPU call" in record.get("during", "")


def run_sweep(names=None, n_workers=2, budget_s=TOTAL_BUDGET_S, log=None) -> dict:
    """Sweep the given overloads (default: every one with a CPU kernel). Returns
    {"records": [...], "counts": {...}, "seconds": ...}."""
    t0 = time.time()
    seen = all_overloads()
    swept = [n for n in seen if has_cpu_kernel(n)]
    if names:
        unknown = sorted(set(names) - set(swept))
        if unknown:
            raise SystemExit(f"not ATen overloads with a CPU kernel: {unknown}")
        todo = [n for n in swept if n in set(names)]
    else:
        todo = swept
    run = [n for n in todo if n not in SKIPS]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"]
    results, undone = sweep_pool.run_isolated(run, cmd, n_workers, OP_TIMEOUT_S, budget_s, log,
                                              control_cmd=cmd + ["--cpu-only"], confirm=lambda r: not _cpu_side(r))
    for r in results.values():
        if r.get("crash") and (_cpu_side(r) or r.get("control") == "crash"):
            # PyTorch's own CPU kernel died on a generated call, or corrupted memory so that the process dies
            # without the device too (invalid input it does not check): no result to compare with.
            r.update(status="skip", reason=f"CPU kernel crashes on the generated call: {r.pop('error')}")
            del r["crash"]
    for n in todo:
        if n in SKIPS:
            results[n] = {"op": n, "status": "skip", "reason": SKIPS[n]}
    for n in undone:
        results[n] = {"op": n, "status": "skip", "reason": f"total time budget of {budget_s:.0f} s exhausted"}
    records = [results[n] for n in todo]
    seconds = round(time.time() - t0, 1)
    return {"records": records, "counts": counts(records, len(seen), len(swept)), "seconds": seconds}


def counts(records, n_seen, n_cpu) -> dict:
    c = Counter(r["status"] for r in records)
    crash = sum(1 for r in records if r.get("crash"))
    constructible = c["pass"] + c["fail"]
    skip_reasons = Counter(r["reason"].split(":")[0] for r in records if r["status"] == "skip")
    return {"overloads_seen": n_seen, "with_cpu_kernel": n_cpu, "swept": len(records),
            "constructible": constructible, "pass": c["pass"], "fail": c["fail"] - crash, "crash": crash,
            "skipped": c["skip"], "skip_reasons": dict(sorted(skip_reasons.items())),
            "pass_pct": round(100.0 * c["pass"] / constructible, 2) if constructible else 100.0}


def expected_entry(record) -> str:
    """The expected-status line for a record (tests/support/expected_status.py)."""
    if record["status"] == "pass":
        return "pass"
    if record["status"] == "skip":
        return "skip: " + record["reason"]
    return "xfail: " + expected_status.explain(record["op"], record["error"])


def format_counts(result) -> str:
    k = result["counts"]
    return (f"ATen overloads: {k['overloads_seen']}; with a CPU kernel: {k['with_cpu_kernel']}; swept: {k['swept']}; "
            f"constructible: {k['constructible']}\npass: {k['pass']}  fail: {k['fail']}  crash: {k['crash']}  "
            f"skipped: {k['skipped']} {k['skip_reasons']}  pass rate: {k['pass_pct']:.2f}%  ({result['seconds']} s)")


def _row(r) -> tuple[str, str, str]:
    dts = " ".join(f"{SHORT[n]}:{d['status']}" for n, d in r.get("dtypes", {}).items())
    detail = r.get("error") or r.get("reason") or ",".join(
        sorted({f for d in r.get("dtypes", {}).values() for f in d.get("fallback_ops", [])}))
    status = "crash" if r.get("crash") else r["status"]
    return status, dts, detail


def format_table(result, failures_only=False) -> str:
    w = max([len(r["op"]) for r in result["records"]] + [10])
    lines = [f"{'op':<{w}}  {'status':<6} {'dtypes':<44} detail"]
    for r in result["records"]:
        status, dts, detail = _row(r)
        if not failures_only or status in ("fail", "crash"):
            lines.append(f"{r['op']:<{w}}  {status:<6} {dts:<44} {detail}")
    return "\n".join(lines + ["", format_counts(result)])


def format_markdown(result) -> str:
    k = result["counts"]
    lines = ["# Dispatcher-surface sweep", "",
             "Generated by `python3 tests/support/dispatcher_sweep.py --markdown docs/dispatcher-sweep.md` "
             "(see the docstring of tests/support/dispatcher_sweep.py for what is compared).", "",
             "| overloads seen | with a CPU kernel | constructible | pass | fail | crash | skipped | seconds |",
             "|---|---|---|---|---|---|---|---|",
             f"| {k['overloads_seen']} | {k['with_cpu_kernel']} | {k['constructible']} | {k['pass']} | {k['fail']} "
             f"| {k['crash']} | {k['skipped']} | {result['seconds']} |", "",
             "Skip reasons: " + ", ".join(f"{why}: {n}" for why, n in k["skip_reasons"].items()), "",
             "| op | status | dtypes | detail |", "|---|---|---|---|"]
    for r in result["records"]:
        status, dts, detail = _row(r)
        lines.append(f"| `{r['op']}` | {status} | {dts} | {detail.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", help="comma-separated overloads (aten::name.overload)")
    p.add_argument("--fast", action="store_true", help="only the default test tier's subset")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--budget", type=float, default=TOTAL_BUDGET_S, help="total seconds (default %(default)s)")
    p.add_argument("--json", help="write the records here")
    p.add_argument("--markdown", help="write the counts and the per-op table here")
    p.add_argument("--write-expected", action="store_true",
                   help=f"rewrite {os.path.relpath(EXPECTED_FILE)} from this sweep (keeps hand-written reasons)")
    p.add_argument("--failures-only", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cpu-only", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return worker_main(a.cpu_only)
    names = [n.strip() for n in a.ops.split(",") if n.strip()] if a.ops else (fast_overloads() if a.fast else None)
    result = run_sweep(names, a.workers, a.budget, log=lambda m: print(m, file=sys.stderr))
    print(format_table(result, a.failures_only))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(format_markdown(result))
    if a.write_expected:
        expected_status.write(EXPECTED_FILE, {r["op"]: expected_entry(r) for r in result["records"]},
                              "tests/support/dispatcher_sweep.py", partial=names is not None)


if __name__ == "__main__":
    main()
