"""Checked-in expected status per op for the sweeps (tests/support/expected/*_status.py): read, write, check.

A table maps an op id to one line:
  "pass"             the op must match the CPU
  "xfail: REASON"    the op fails on neuron for REASON (a TorchNeuron refusal or a named known bug);
                     strict: the test fails when the op starts passing (regenerate the table)
  "skip: REASON"     the sweep does not run the op (REASON says why); the test fails when it starts running

Regenerating keeps the reason of an op that still fails (it may be hand-written) unless it is
"unclassified"; new failures get a reason from KNOWN_CAUSES (by op name and error text), "unclassified"
when none applies.
"""
import importlib.util
import os

import pytest

# needle in "OP ERROR" -> named cause. First match wins.
KNOWN_CAUSES = (
    ("on the neuron device", "TorchNeuron refusal"),
    ("Neuron tensors only support", "TorchNeuron refusal"),
    ("expected sparse", "TorchNeuron refusal (sparse layouts), with an unclear message"),
    ("only supports CPU, CUDA and XPU", "known bug (issue 9 class 3): the CPU kernel checks the device type"),
    ("DispatchStub: missing kernel", "known bug (issue 9 class 3): per-device stub missing for neuron"),
    ("_thnn_fused", "known bug (issue 9 class 2): fused accelerator-only cell kernel"),
    ("stacked_rnn", "known bug (issue 9 class 2): LSTM/GRU take the fused-cell path on neuron"),
    ("_flash_attention", "known bug (issue 9 class 2): fused accelerator-only attention kernel"),
    ("_efficient_attention", "known bug (issue 9 class 2): fused accelerator-only attention kernel"),
    ("aten::histc", "known bug (issue 9 class 4): histc"),
    ("aten::gcd", "known bug (issue 9 class 4): gcd"),
    ("aten::logit_backward", "known bug (issue 9 class 4): logit_backward"),
    ("aten::_fused_sgd", "known bug (issue 9 class 4): fused SGD in low precision"),
    ("aten::grid_sampler", "known bug (issue 9 class 4): grid_sampler backward in low precision"),
    ("aten::_efficientzerotensor", "known bug (issue 9 class 5): _efficientzerotensor crash"),
    ("set_: source storage is on cpu", "known bug (issue 9 class 5): set_ with a CPU storage"),
    ("tensor_indices_or_sections to be on cpu", "known bug (issue 9 class 5): tensor_split with a neuron index"),
    ("Expected tensor to have CPU Backend", "known bug (issue 9 class 3): a CompositeExplicit kernel calls the "
                                            "CPU implementation directly"),
    ("Expected storage != nullptr", "known bug (issue 9 class 5): storage plumbing (copy-on-write clone)"),
    ("aten::_stack.out", "known bug: on neuron, _stack.out misses the CPU kernel's serial-stack path and "
                         "concatenates the unstacked inputs"),
    ("instead of refusing it", "known bug: sparse / nested layouts built by a factory reach the device unrefused"),
    ("crash", "known bug: crashes the process"),
    ("timeout", "known bug: hangs"),
)


def explain(op: str, error: str) -> str:
    text = f"{op} {error}"
    for needle, cause in KNOWN_CAUSES:
        if needle in text:
            return f"{cause}: {error}"
    return f"unclassified: {error}"


def load(path: str) -> dict[str, str]:
    if not os.path.exists(path):
        return {}
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.EXPECTED)


def write(path: str, entries: dict[str, str], generator: str, partial: bool = False) -> None:
    """Write entries (op -> line) to path; partial: merge them into the existing table."""
    old = load(path)
    table = dict(old) if partial else {}
    for op, line in entries.items():
        if line.startswith("xfail:") and old.get(op, "").startswith("xfail:") \
                and not old[op].startswith("xfail: unclassified"):
            line = old[op]  # still failing: keep the (possibly hand-written) reason
        table[op] = line
    if partial:
        table = {op: table[op] for op in sorted(table)}
    body = "\n".join(f"    {op!r}: {line!r}," for op, line in table.items())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f'"""Expected status per op of {generator} (format: tests/support/expected_status.py).\n\n'
                f"Regenerate after a change in the device: python3 {generator} --write-expected\n"
                f'(an xfail reason edited by hand is kept while the op still fails)."""\n'
                f"# flake8: noqa: E501\nEXPECTED = {{\n{body}\n}}\n")


def check(op: str, expected: str, status: str, detail: str) -> None:
    """Assert one op's swept status (pass / fail / skip) against its expected line; xfail/skip it."""
    kind, _, reason = expected.partition(": ")
    regenerate = "if intended, regenerate the table (see its docstring)"
    if kind == "pass":
        assert status == "pass", f"{op} regressed: {status}: {detail}"
    elif kind == "xfail":
        assert status != "pass", f"{op} now passes but is expected to fail ({reason}); {regenerate}"
        assert status == "fail", f"{op} expected to fail ({reason}) but is now {status}: {detail}; {regenerate}"
        pytest.xfail(reason)
    elif kind == "skip":
        assert status == "skip", f"{op} expected skipped ({reason}) but now {status}: {detail}; {regenerate}"
        pytest.skip(reason)
    else:
        raise AssertionError(f"{op}: malformed expected status {expected!r}")
