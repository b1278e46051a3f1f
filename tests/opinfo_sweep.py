"""OpInfo compare-to-CPU sweep: PyTorch's own ``op_db`` run on CPU and on ``neuron``, compared.

For every OpInfo (name + variant) and each dtype in (float32, bfloat16) the op supports on CPU, the
first ``SAMPLES_PER_DTYPE`` samples of ``op.sample_inputs("cpu", dtype)`` run on CPU; a sample whose CPU
run raises is dropped (an op/dtype with no sample that runs on CPU is "cpu-unsupported" and is not in
the denominator). The rest is copied to ``neuron`` (every tensor, nested or not; a ``device="cpu"``
argument becomes ``"neuron"``; views keep their storage layout), run there, copied back and compared
with ``torch.testing.assert_close`` (tolerances below). A bfloat16 output outside the tolerance still
matches when it is as accurate as CPU's against a float32 reference (see _close_to_reference); such
outputs are noted in the record. Random ops are compared on shape and dtype only.

Per op:
  native    every sample matched and ``torch_neuronx.get_fallback_ops()`` stayed empty for the op
  fallback  every sample matched, but some aten op ran as a CPU fallback
  fail      a mismatch or an exception on neuron while CPU worked, or the worker died / hung on it
            ("fail (crash)" / "fail (timeout)")
  cpu-unsupported / no-samples / skipped   not in the denominator

Crash isolation: the ops are split over a few worker processes (a fixed list each, so a sweep is
reproducible), handed over stdin one at a time. A worker announces each op before it starts it, so when
a worker dies (segfault, abort) or exceeds the per-op timeout, the op it was on is known: it is recorded
as "fail (crash ...)" / "fail (timeout ...)", a fresh worker continues with the rest of the list, and at
the end the op is re-run alone in a fresh process to tell "also alone" from "in sequence only".

Usage: python tests/opinfo_sweep.py [--ops a,b] [--json out.json] [--workers N] [--samples N]
                                   [--failures-only] [--reference-inputs]
"""
import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

DTYPE_NAMES = ("float32", "bfloat16")
SHORT = {"float32": "f32", "bfloat16": "bf16"}
SAMPLES_PER_DTYPE = 3
# One op (all its dtypes and samples) on a shared 2-core machine; the slowest op takes ~1 s.
OP_TIMEOUT_S = float(os.environ.get("OPINFO_SWEEP_OP_TIMEOUT", "60"))
FAULTS_VAR = "OPINFO_SWEEP_FAULTS"
REFERENCE_INPUTS_VAR = "OPINFO_SWEEP_REFERENCE_INPUTS"  # 1: op.reference_inputs (more, larger samples)
WORKER_START_TIMEOUT_S = 120.0  # importing torch + op_db

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

# float32 tolerances (rtol, atol) for ops whose results legitimately depend on accumulation order or
# on the LAPACK/BLAS/FFT path taken: reductions, matrix products, decompositions, transforms. The
# default float32 tolerances of assert_close (1.3e-6 / 1e-5) apply to everything else. Measured on the
# simulated device (host kernels), no op needs the loose values yet: they are headroom for device
# kernels that accumulate in another order, still tight enough to catch wrong results.
FLOAT32_LOOSE = (1e-4, 1e-4)
BFLOAT16_TOL = (1e-2, 1e-2)
LOOSE_PREFIXES = ("linalg.", "nn.functional.conv", "nn.functional.linear", "nn.functional.bilinear", "fft.")
LOOSE_NAMES = {
    "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "addr", "mv", "dot", "vdot", "inner",
    "outer", "einsum", "tensordot", "chain_matmul", "kron", "cdist", "pdist", "cholesky", "cholesky_solve",
    "cholesky_inverse", "lu", "lu_solve", "lu_unpack", "triangular_solve", "pinverse", "inverse", "det",
    "logdet", "slogdet", "svd", "svd_lowrank", "pca_lowrank", "qr", "geqrf", "ormqr",
    "matrix_exp", "trace", "std", "var", "std_mean", "var_mean", "sum", "nansum", "mean", "nanmean",
    "prod", "cumsum", "cumprod", "logcumsumexp", "logsumexp", "norm", "renorm", "dist", "trapz",
    "trapezoid", "cumulative_trapezoid", "softmax", "log_softmax", "_softmax_backward_data",
    "nn.functional.layer_norm", "nn.functional.group_norm", "nn.functional.instance_norm",
    "nn.functional.batch_norm", "nn.functional.rms_norm", "nn.functional.local_response_norm",
    "nn.functional.normalize", "nn.functional.cosine_similarity", "nn.functional.pairwise_distance",
    "nn.functional.scaled_dot_product_attention", "nn.functional.multi_head_attention_forward",
    "stft", "istft", "corrcoef", "cov",
}


def op_id(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def is_random(op) -> bool:
    if op_id(op) in NOT_RANDOM:
        return False
    return op.has_nondeterministic_output or any(p in op.name for p in RANDOM_NAME_PARTS) \
        or op.name in SHAPE_ONLY


def tolerances(op, dtype_name: str):
    if dtype_name == "bfloat16":
        return BFLOAT16_TOL
    if op.name in LOOSE_NAMES or op.name.startswith(LOOSE_PREFIXES) or type(op).__name__ == "ReductionOpInfo":
        return FLOAT32_LOOSE
    return None  # assert_close defaults


# ----------------------------------------------------------------------------------------------------
# worker side


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def _to_neuron(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        # A copy (the CPU run may modify the original in place) with the same storage layout: views keep
        # their strides, storage offset and the rest of their storage (as_strided reads it).
        t = obj.detach()
        if t.layout != torch.strided:  # sparse and other layouts: however the device takes them
            return t.to("neuron")
        if t._is_view() or t.storage_offset() != 0 or not t.is_contiguous():
            n = t.untyped_storage().nbytes() // t.element_size()
            storage = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
            return storage.clone().to("neuron").as_strided(t.size(), t.stride(), t.storage_offset())
        return t.clone().to("neuron")
    if isinstance(obj, torch.device) and obj.type == "cpu":
        return torch.device("neuron")
    if isinstance(obj, str) and obj == "cpu":
        return "neuron"
    if isinstance(obj, list):
        return [_to_neuron(x) for x in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_to_neuron(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_neuron(v) for k, v in obj.items()}
    return obj


def _flatten(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in _flatten(o)]
    if isinstance(out, dict):
        return [x for k in sorted(out) for x in _flatten(out[k])]
    return [out]


def _upcast(obj):
    """The sample with its bfloat16 tensors as float32 copies: inputs of the float32 reference."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to(torch.float32) if obj.dtype == torch.bfloat16 else obj.detach().clone()
    if isinstance(obj, list):
        return [_upcast(x) for x in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_upcast(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _upcast(v) for k, v in obj.items()}
    return obj


def _rmse(a, b) -> float:
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def _close_to_reference(c, d, ref) -> bool:
    """bfloat16 rescue, as torch._dynamo.utils.same does for low-precision backends: the neuron result is
    accepted when its RMSE against a float32 reference (same inputs, upcast) is at most twice the CPU
    bfloat16 result's RMSE against it (dynamo allows 3x) plus atol/10. An op decomposed differently
    from CPU's fused kernel rounds at other places, so bfloat16 results can differ from CPU's by more
    than 1e-2 while being just as accurate."""
    import torch

    if not isinstance(ref, torch.Tensor) or ref.shape != c.shape or not ref.is_floating_point():
        return False
    ref = ref.detach().to("cpu")
    finite = torch.isfinite(ref) & torch.isfinite(c.float())
    if not torch.equal(torch.isfinite(d.float()) & finite, finite) or not finite.any():
        return False
    cpu_err, dev_err = _rmse(c[finite], ref[finite]), _rmse(d[finite], ref[finite])
    return dev_err <= 2.0 * cpu_err + BFLOAT16_TOL[1] / 10


def _compare(op, dtype_name, cpu_out, dev_out, random_op, ref_out=None) -> list[str]:
    """Raise AssertionError describing the first difference. Returns notes (outputs matched by reference)."""
    import torch

    notes = []
    cpu_leaves, dev_leaves = _flatten(cpu_out), _flatten(dev_out)
    ref_leaves = _flatten(ref_out) if ref_out is not None else []
    if len(ref_leaves) != len(cpu_leaves):
        ref_leaves = [None] * len(cpu_leaves)
    if len(cpu_leaves) != len(dev_leaves):
        raise AssertionError(f"output structure differs: {len(cpu_leaves)} vs {len(dev_leaves)} leaves")
    tol = tolerances(op, dtype_name)
    for i, (c, d) in enumerate(zip(cpu_leaves, dev_leaves)):
        if isinstance(c, torch.Tensor):
            if not isinstance(d, torch.Tensor):
                raise AssertionError(f"output {i}: neuron returned {type(d).__name__}, CPU a tensor")
            if c.device.type == "cpu" and d.device.type != "neuron":
                raise AssertionError(f"output {i}: on {d.device} instead of neuron")
            if c.shape != d.shape or c.dtype != d.dtype:
                raise AssertionError(f"output {i}: neuron {d.dtype}{list(d.shape)} vs CPU {c.dtype}{list(c.shape)}")
            if random_op:
                continue
            d = d.detach().to("cpu")
            kw = {} if tol is None or not (c.is_floating_point() or c.is_complex()) else {"rtol": tol[0], "atol": tol[1]}
            try:
                torch.testing.assert_close(d, c.detach(), equal_nan=True, check_stride=False, **kw)
            except AssertionError as e:
                if dtype_name == "bfloat16" and c.is_floating_point() and _close_to_reference(c, d, ref_leaves[i]):
                    notes.append(f"output {i} matched by float32-reference RMSE")
                    continue
                lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                raise AssertionError(f"output {i}: " + "; ".join(lines[:3])) from None
        elif isinstance(c, float) and isinstance(d, float):
            if not random_op and not (abs(c - d) <= 1e-5 + 1e-5 * abs(c) or (c != c and d != d)):
                raise AssertionError(f"output {i}: {d} vs CPU {c}")
        elif not random_op and c != d and not isinstance(c, torch.Tensor):
            raise AssertionError(f"output {i}: {d!r} vs CPU {c!r}")
    return notes


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
            record["dtypes"][dtype_name] = {"status": "cpu-unsupported", "error": "sample_inputs: " + _first_line(e)}
            continue
        ran_on_cpu, status, error, notes = 0, "match", None, set()
        keep = KEEP_ON_CPU.get(op_id(op), ((),))[0]
        for sample in samples:
            # Copy to neuron (and upcast for the bf16 reference) first: the CPU run may modify its inputs.
            move_error = None
            try:
                dev_input = _to_neuron(sample.input)
                dev_args = tuple((a.clone() if isinstance(a, torch.Tensor) else a) if i in keep else _to_neuron(a)
                             for i, a in enumerate(sample.args))
                dev_kwargs = _to_neuron(dict(sample.kwargs))
            except Exception as e:  # noqa: BLE001  (e.g. a sparse tensor refused by the device)
                move_error = e
            ref_inputs = None
            if dtype_name == "bfloat16" and not random_op:
                try:
                    ref_inputs = (_upcast(sample.input), _upcast(tuple(sample.args)), _upcast(dict(sample.kwargs)))
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
                status, error = "mismatch", _first_line(e)
            except Exception as e:  # noqa: BLE001
                status, error = "error", _first_line(e)
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
    import faulthandler
    import warnings

    faulthandler.enable()
    warnings.simplefilter("ignore")
    import torch  # noqa: F401
    import torch_neuronx  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db

    warnings.simplefilter("ignore")
    by_id = {op_id(op): op for op in op_db}
    # Test hook for the isolation machinery: OPINFO_SWEEP_FAULTS="crash:op_a,hang:op_b" makes the worker
    # segfault / hang when it starts that op.
    faults = {n: k for k, n in (f.split(":", 1) for f in os.environ.get(FAULTS_VAR, "").split(",") if ":" in f)}
    out = sys.stdout
    print("READY", flush=True)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        print("START " + name, flush=True)
        if faults.get(name) == "crash":
            faulthandler._sigsegv()
        elif faults.get(name) == "hang":
            time.sleep(10 * OP_TIMEOUT_S)
        t0 = time.time()
        try:
            record = run_op(by_id[name], n_samples)
        except Exception as e:  # noqa: BLE001  (a bug in the sweep itself: report it as such)
            record = {"op": name, "status": "fail", "error": "sweep error: " + _first_line(e), "dtypes": {},
                      "fallback_ops": []}
        record["seconds"] = round(time.time() - t0, 3)
        out.write("RESULT " + json.dumps(record) + "\n")
        out.flush()


# ----------------------------------------------------------------------------------------------------
# parent side


class Worker:
    def __init__(self, wid: int, events: queue.Queue, n_samples: int, todo: list[str]):
        self.wid = wid
        self.todo = todo  # this worker's ops, in order
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        env = dict(os.environ, TORCH_NEURONX_LOG_LEVEL="0", PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "--samples", str(n_samples)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, bufsize=1, env=env)
        self.current: str | None = None
        self.deadline = time.time() + WORKER_START_TIMEOUT_S
        self.ready = False
        self.timed_out = None
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        for line in self.proc.stdout:
            events.put((self, line.rstrip("\n")))
        events.put((self, None))  # EOF: the process exited

    def send(self, name: str):
        self.current = name
        self.deadline = time.time() + OP_TIMEOUT_S
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        lines = [ln for ln in self.stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        keep = [ln for ln in lines if "Fatal Python error" in ln or "Error" in ln or "Aborted" in ln]
        return (keep[-1] if keep else (lines[-1] if lines else "")).strip()[:300]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def _run_queue(names, n_workers, n_samples, on_dead):
    """Run names over n_workers processes. on_dead(name, kind, detail) -> record for an op a worker died on.

    Worker i gets names[i::n_workers], in order, so that every op runs after the same ops in the same
    process from one sweep to the next (a device bug that depends on earlier ops reproduces). A worker
    replacing a dead one continues its list."""
    events: queue.Queue = queue.Queue()
    results: dict[str, dict] = {}
    n = max(1, min(n_workers, len(names)))
    workers = [Worker(i, events, n_samples, list(names[i::n])) for i in range(n) if names[i::n]]
    next_id = len(workers)

    def feed(w):
        if w.todo:
            w.send(w.todo.pop(0))
        else:
            w.current = None
            w.close()

    live = set(workers)
    while live:
        try:
            w, line = events.get(timeout=1.0)
        except queue.Empty:
            w, line = None, None
            now = time.time()
            for x in list(live):
                if x.proc.poll() is None and now > x.deadline:
                    x.timed_out = f"timeout after {OP_TIMEOUT_S:.0f} s" if x.ready else "worker start timeout"
                    x.kill()  # the reader thread then posts EOF, handled below
            continue
        if w not in live:
            continue
        if line is None:  # the worker exited
            live.discard(w)
            w.proc.wait()
            if w.current is not None:
                kind = w.timed_out or f"crash, exit code {w.proc.returncode}"
                results[w.current] = on_dead(w.current, kind, w.stderr_tail())
                w.current = None
            elif not w.ready:
                raise RuntimeError(f"sweep worker failed to start: {w.stderr_tail()}")
            if w.todo:
                nw = Worker(next_id, events, n_samples, w.todo)
                next_id += 1
                live.add(nw)
            continue
        if line == "READY":
            w.ready = True
            feed(w)
        elif line.startswith("START "):
            pass
        elif line.startswith("RESULT "):
            record = json.loads(line[len("RESULT "):])
            results[record["op"]] = record
            w.current = None
            feed(w)
    return results


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

    def died(name, kind, detail):
        return {"op": name, "status": "fail", "crash": kind, "detail": detail, "dtypes": {}, "fallback_ops": [],
                "error": f"{kind}: {detail}" if detail else kind}

    results = _run_queue(todo, n_workers, n_samples, died)
    # Each op a worker died on runs again alone in a fresh process: a crash that needs what ran before it
    # in the same process shows up as "in sequence only" (still a device bug: state leaks between ops).
    for name in [n for n in todo if results[n].get("crash")]:
        first = results[name]
        if log:
            log(f"worker died on {name} ({first['crash']}); re-running it alone")
        alone = _run_queue([name], 1, n_samples, died)[name]
        if alone.get("crash"):
            alone["error"] = f"fail ({alone['crash']}, also alone): {alone['detail']}".rstrip(": ")
            results[name] = alone
        else:
            first["error"] = (f"fail ({first['crash']} in sequence only; alone: {alone['status']}): "
                              f"{first['detail']}").rstrip(": ")
    records = [results[n] for n in todo]
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


if __name__ == "__main__":
    main()
