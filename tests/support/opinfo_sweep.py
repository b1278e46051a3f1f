"""OpInfo compare-to-CPU sweep: PyTorch's own ``op_db`` run on CPU and on ``neuron``, compared.

For every OpInfo (name + variant) and each dtype in (float32, bfloat16) the op supports on CPU, the
first ``SAMPLES_PER_DTYPE`` samples of ``op.sample_inputs("cpu", dtype)`` run on CPU; a sample whose CPU
run raises is dropped (an op/dtype with no sample that runs on CPU is "cpu-unsupported" and is not in
the denominator). The rest is copied to ``neuron`` (every tensor, nested or not; a ``device="cpu"``
argument becomes ``"neuron"``; views keep their storage layout), run there, copied back and compared
with ``torch.testing.assert_close`` (tolerances in tests/support/sweep_compare.py). A bfloat16 output outside the tolerance still
matches when it is as accurate as CPU's against a float32 reference (see sweep_compare.close_to_reference); such
outputs are noted in the record. Random ops are compared on shape and dtype only.

Per op:
  native    every sample matched and ``torch_neuronx.get_fallback_ops()`` stayed empty for the op
  fallback  every sample matched, but some aten op ran as a CPU fallback
  fail      a mismatch or an exception on neuron while CPU worked, or the worker died / hung on it
            ("fail (crash)" / "fail (timeout)")
  cpu-unsupported / no-samples / skipped   not in the denominator

Crash isolation and the time budget: tests/support/sweep_pool.py. Moving and comparing: tests/support/sweep_compare.py.

Usage: python tests/support/opinfo_sweep.py [--ops a,b] [--json out.json] [--workers N] [--samples N]
                                   [--failures-only] [--reference-inputs] [--write-expected]
"""
import argparse
import json
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import expected_status  # noqa: E402
import sweep_compare  # noqa: E402
import sweep_pool  # noqa: E402

DTYPE_NAMES = ("float32", "bfloat16")
SHORT = {"float32": "f32", "bfloat16": "bf16"}
SAMPLES_PER_DTYPE = 3
# One op (all its dtypes and samples) on a shared 2-core machine; the slowest op takes ~1 s.
OP_TIMEOUT_S = float(os.environ.get("OPINFO_SWEEP_OP_TIMEOUT", "60"))
REFERENCE_INPUTS_VAR = "OPINFO_SWEEP_REFERENCE_INPUTS"  # 1: op.reference_inputs (more, larger samples)
EXPECTED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected", "opinfo_status.py")

# OpInfos not swept at all. They are not in the denominator, and they are printed with the table.
# Keep this short: every entry is an op the sweep cannot meaningfully run, with the reason.
SKIPS: dict[str, str] = {
}

# Ops whose values are not a function of their inputs: compared on shape / dtype only (besides the
# random ops found by name and the OpInfos flagged has_nondeterministic_output).
SHAPE_ONLY: dict[str, str] = {
    "empty": "uninitialized memory",
    "empty_like": "uninitialized memory",
    "empty_strided": "uninitialized memory",
    "empty_permuted": "uninitialized memory",
    "new_empty": "uninitialized memory",
    "new_empty_strided": "uninitialized memory",
}
RANDOM_NAME_PARTS = ("rand", "normal", "bernoulli", "dropout", "multinomial", "poisson")
# Names that contain one of the parts above but are deterministic: compared on values.
NOT_RANDOM: dict[str, str] = {
    "__rand__": "reflected bitwise and",
    "nn.functional.normalize": "L_p normalization",
    "masked.normalize": "L_p normalization",
    "nn.functional.poisson_nll_loss": "a loss, no sampling",
    "native_dropout_backward": "applies a given mask",
    "nn.functional.feature_alpha_dropout.without_train": "identity outside training",
}

# Sample arguments that PyTorch requires on the CPU whatever the device (the OpInfo sample function
# builds them there on purpose): op -> (argument positions in sample.args, reason).
KEEP_ON_CPU: dict[str, tuple[tuple[int, ...], str]] = {
    "tensor_split": ((0,), "tensor_indices_or_sections must be a CPU tensor on every device (ATen check)"),
}


def op_id(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def is_random(op) -> bool:
    if op_id(op) in NOT_RANDOM:
        return False
    return op.has_nondeterministic_output or any(p in op.name for p in RANDOM_NAME_PARTS) \
        or op.name in SHAPE_ONLY


def tolerances(op, dtype_name: str):
    return sweep_compare.tolerance(op.name, dtype_name, reduction=type(op).__name__ == "ReductionOpInfo")


# ----------------------------------------------------------------------------------------------------
# worker side


def _compare(op, dtype_name, cpu_out, dev_out, random_op, ref_out=None) -> list[str]:
    return sweep_compare.compare(cpu_out, dev_out, tolerances(op, dtype_name), not random_op, ref_out)


def run_op(op, n_samples=SAMPLES_PER_DTYPE) -> dict:
    """Sweep one OpInfo in this process. Returns the per-op record."""
    import itertools

    import torch
    import torch_neuronx

    record = {"op": op_id(op), "dtypes": {}, "fallback_ops": [], "error": None}
    random_op = is_random(op)
    supported = op.supported_dtypes("cpu")
    fallback_ops: set[str] = set()
    for dtype_name in DTYPE_NAMES:
        dtype = getattr(torch, dtype_name)
        if dtype not in supported:
            continue
        torch.manual_seed(0)
        try:
            inputs = op.reference_inputs if os.environ.get(REFERENCE_INPUTS_VAR) == "1" else op.sample_inputs
            samples = list(itertools.islice(inputs("cpu", dtype, requires_grad=False), n_samples))
        except Exception as e:  # noqa: BLE001
            record["dtypes"][dtype_name] = {"status": "cpu-unsupported", "error": "sample_inputs: " + sweep_pool.first_line(e)}
            continue
        ran_on_cpu, status, error, notes = 0, "match", None, set()
        keep = KEEP_ON_CPU.get(op_id(op), ((),))[0]
        for sample in samples:
            # Copy to neuron (and upcast for the bf16 reference) first: the CPU run may modify its inputs.
            move_error = None
            try:
                dev_input = sweep_compare.to_neuron(sample.input)
                dev_args = tuple((a.clone() if isinstance(a, torch.Tensor) else a) if i in keep else sweep_compare.to_neuron(a)
                             for i, a in enumerate(sample.args))
                dev_kwargs = sweep_compare.to_neuron(dict(sample.kwargs))
            except Exception as e:  # noqa: BLE001  (e.g. a sparse tensor refused by the device)
                move_error = e
            ref_inputs = None
            if dtype_name == "bfloat16" and not random_op:
                try:
                    ref_inputs = (sweep_compare.upcast(sample.input), sweep_compare.upcast(tuple(sample.args)), sweep_compare.upcast(dict(sample.kwargs)))
                except Exception:  # noqa: BLE001  (no reference then: plain comparison)
                    ref_inputs = None
            try:
                torch.manual_seed(1)
                cpu_out = op(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001
                continue
            ran_on_cpu += 1
            ref_out = None
            if ref_inputs is not None:
                try:
                    ref_out = op(ref_inputs[0], *ref_inputs[1], **ref_inputs[2])
                except Exception:  # noqa: BLE001
                    ref_out = None
            torch_neuronx.clear_op_tracking()
            try:
                if move_error is not None:
                    raise move_error
                torch.manual_seed(1)
                dev_out = op(dev_input, *dev_args, **dev_kwargs)
                torch_neuronx.synchronize()
                notes.update(_compare(op, dtype_name, cpu_out, dev_out, random_op, ref_out))
            except AssertionError as e:
                status, error = "mismatch", sweep_pool.first_line(e)
            except Exception as e:  # noqa: BLE001
                status, error = "error", sweep_pool.first_line(e)
            fallback_ops.update(torch_neuronx.get_fallback_ops())
            if status != "match":
                break
        if not samples:
            record["dtypes"][dtype_name] = {"status": "no-samples"}
        elif ran_on_cpu == 0:
            record["dtypes"][dtype_name] = {"status": "cpu-unsupported"}
        else:
            record["dtypes"][dtype_name] = {"status": status, "error": error, "samples": ran_on_cpu}
            if notes:
                record["dtypes"][dtype_name]["notes"] = sorted(notes)
    record["fallback_ops"] = sorted(fallback_ops)
    record.update(classify(record))
    return record


def classify(record) -> dict:
    statuses = [d["status"] for d in record["dtypes"].values()]
    failed = [(n, d) for n, d in record["dtypes"].items() if d["status"] in ("mismatch", "error")]
    if failed:
        name, d = failed[0]
        return {"status": "fail", "error": f"[{name}] {d['error']}"}
    if "match" in statuses:
        return {"status": "fallback" if record["fallback_ops"] else "native", "error": None}
    if not statuses:
        return {"status": "cpu-unsupported", "error": "no float32/bfloat16 support on CPU"}
    if all(s == "no-samples" for s in statuses):
        return {"status": "no-samples", "error": None}
    return {"status": "cpu-unsupported", "error": None}


def worker_main(n_samples: int) -> None:
    import warnings

    warnings.simplefilter("ignore")
    import torch  # noqa: F401
    import torch_neuronx  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    warnings.simplefilter("ignore")
    by_id = {op_id(op): op for op in op_db}

    def run_one(name):
        return {"dtypes": {}, "fallback_ops": [], **run_op(by_id[name], n_samples)}

    sweep_pool.serve(run_one, hang_seconds=10 * OP_TIMEOUT_S)


# ----------------------------------------------------------------------------------------------------
# parent side


def run_sweep(names=None, n_workers=2, n_samples=SAMPLES_PER_DTYPE, log=None) -> dict:
    """Sweep op_db (or the given op ids). Returns {"records": [...], "skipped": {...}, "seconds": ...}."""
    from torch.testing._internal.common_methods_invocations import op_db

    t0 = time.time()
    all_ids = [op_id(op) for op in op_db]
    if names:
        unknown = sorted(set(names) - set(all_ids))
        if unknown:
            raise SystemExit(f"unknown op ids: {unknown}")
        all_ids = [n for n in all_ids if n in set(names)]
    skipped = {n: SKIPS[n] for n in all_ids if n in SKIPS}
    todo = [n for n in all_ids if n not in SKIPS]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--samples", str(n_samples)]
    results, _ = sweep_pool.run_isolated(todo, cmd, n_workers, OP_TIMEOUT_S, log=log)
    records = [{"dtypes": {}, "fallback_ops": [], **results[n]} for n in todo]
    return {"records": records, "skipped": skipped, "seconds": round(time.time() - t0, 1)}


def summarize(result) -> dict:
    counts = Counter(r["status"] for r in result["records"])
    ran = counts["native"] + counts["fallback"] + counts["fail"]
    matched = counts["native"] + counts["fallback"]
    return {"swept": len(result["records"]), "ran_on_cpu": ran, "native": counts["native"],
            "fallback": counts["fallback"], "fail": counts["fail"],
            "cpu_unsupported": counts["cpu-unsupported"], "no_samples": counts["no-samples"],
            "skipped": len(result["skipped"]), "match_pct": 100.0 * matched / ran if ran else 100.0,
            "seconds": result["seconds"]}


def pass_fail_skip(record) -> str:
    """pass / fail / skip, as tests/support/expected_status.py checks it."""
    return {"native": "pass", "fallback": "pass", "fail": "fail"}.get(record["status"], "skip")


def expected_entry(record) -> str:
    status = pass_fail_skip(record)
    if status == "pass":
        return "pass"
    if status == "skip":
        return "skip: " + record["status"] + (f" ({record['error']})" if record.get("error") else "")
    return "xfail: " + expected_status.explain(record["op"], record["error"])


def format_table(result, per_op=True, failures_only=False) -> str:
    lines = []
    if per_op:
        w = max([len(r["op"]) for r in result["records"]] + [10])
        lines.append(f"{'op':<{w}}  {'status':<16} {'dtypes':<30} detail")
        for r in result["records"]:
            if failures_only and r["status"] != "fail":
                continue
            dts = " ".join(f"{SHORT[n]}:{d['status']}" for n, d in r["dtypes"].items())
            detail = r["error"] or (",".join(r["fallback_ops"]) if r["fallback_ops"] else "")
            lines.append(f"{r['op']:<{w}}  {r['status']:<16} {dts:<30} {detail}")
        for n, why in result["skipped"].items():
            lines.append(f"{n:<{w}}  {'skipped':<16} {'':<30} {why}")
    s = summarize(result)
    lines.append("")
    lines.append(f"OpInfos swept: {s['swept']} (+{s['skipped']} skipped); ran on CPU: {s['ran_on_cpu']}; "
                 f"cpu-unsupported: {s['cpu_unsupported']}; no samples: {s['no_samples']}")
    lines.append(f"native: {s['native']}  fallback: {s['fallback']}  fail: {s['fail']}  "
                 f"match: {s['match_pct']:.2f}%  ({s['seconds']} s)")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", help="comma-separated op ids (name or name.variant)")
    p.add_argument("--json", help="write the records here")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--samples", type=int, default=SAMPLES_PER_DTYPE)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--write-expected", action="store_true",
                   help=f"rewrite {os.path.relpath(EXPECTED_FILE)} from this sweep (keeps hand-written reasons)")
    p.add_argument("--failures-only", action="store_true", help="print only failing ops in the table")
    p.add_argument("--reference-inputs", action="store_true",
                   help="draw samples from op.reference_inputs (a wider, exploratory set) instead of sample_inputs")
    a = p.parse_args(argv)
    if a.reference_inputs:
        os.environ[REFERENCE_INPUTS_VAR] = "1"  # the workers inherit it
    if a.worker:
        return worker_main(a.samples)
    names = [n.strip() for n in a.ops.split(",") if n.strip()] if a.ops else None
    result = run_sweep(names, a.workers, a.samples, log=lambda m: print(m, file=sys.stderr))
    print(format_table(result, failures_only=a.failures_only))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summarize(result), **result}, f, indent=1)
    if a.write_expected:
        entries = {r["op"]: expected_entry(r) for r in result["records"]}
        entries.update({n: "skip: " + why for n, why in result["skipped"].items()})
        expected_status.write(EXPECTED_FILE, entries, "tests/support/opinfo_sweep.py", partial=names is not None)


if __name__ == "__main__":
    main()
