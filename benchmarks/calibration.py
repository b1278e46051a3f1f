"""Compares `localneuron estimate` (its default path: the model as a tuned recipe runs it) with every
published Trainium result of the calibration set, benchmarks/published-trainium-rows.json, and writes
docs/calibration.md (each row: published, estimate, error; mean absolute error and worst row per
hardware and kind; the rows left out and why; repeat releases as a noise floor; the cross-validation)
and localneuron/estimate/calibration.json (what each kind covers and its error: the trust line every
estimate prints). Calibration rows only: other published results judge the model and are deliberately
not used here.

    python3 benchmarks/calibration.py            # rewrites docs/calibration.md and calibration.json
    python3 benchmarks/calibration.py --no-cv    # print the page without the cross-validation; writes nothing
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "nki"))
os.environ.setdefault("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")

from localneuron.costmodel import assumptions, collectives  # noqa: E402
from localneuron.costmodel.engines import op_work  # noqa: E402
from localneuron.costmodel.hardware import chip  # noqa: E402
from localneuron.estimate import architecture, plan, run  # noqa: E402
from localneuron.estimate.layout import Layout  # noqa: E402

ROWS = ROOT / "benchmarks" / "published-trainium-rows.json"
CONFIGS = ROOT / "benchmarks" / "configs"
DOC = ROOT / "docs" / "calibration.md"
TABLE = ROOT / "localneuron" / "estimate" / "calibration.json"

# the published model name -> its public architecture (benchmarks/configs/*.json)
MODELS = {
    "GPT3-6.7B": "gpt3-6.7b", "GPT3-23B": "gpt3-23b", "GPT3-46B": "gpt3-46b", "GPT3-175B": "gpt3-175b",
    "Llama2-13B": "llama-2-13b", "Llama-2-13b": "llama-2-13b", "Llama2-70B": "llama-2-70b", "Llama-2-70b": "llama-2-70b",
    "Llama-2-7b": "llama-2-7b", "Llama-3-8B": "llama-3-8b", "Llama-3-70B": "llama-3-70b",
    "Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.3-70B-Instruct": "llama-3.3-70b",
    "Llama-3.1-405B-Instruct": "llama-3.1-405b", "CodeLlama-13b-hf": "codellama-13b",
    "Mistral-7B-Instruct-v0.2": "mistral-7b-v0.2", "Qwen3-32B": "qwen3-32b",
    "Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b", "Llama-4-Scout-17B-16E-Instruct": "llama-4-scout-17b-16e",
    "Llama-4-Maverick-17B-128E-Instruct": "llama-4-maverick-17b-128e",
    "HuggingFace BERT-Large Ph1": "bert-large", "HuggingFace BERT-Large Ph2": "bert-large",
    "HuggingFace ViT-Base": "vit-base",
}
# the model families of the configs, as the cross-validation leaves them out one at a time
FAMILY = {"gpt3": "GPT-3", "llama-2": "Llama-2", "codellama": "Llama-2", "llama-3": "Llama-3",
          "mistral": "Mistral", "qwen3": "Qwen3", "llama-4": "Llama-4", "bert": "BERT", "vit": "ViT"}
METRIC = {"train": "seq_per_s", "prefill": "ttft_s", "decode": "tpot_s"}
UNIT = {"seq/s": 1.0, "ms": 1e-3, "ms/token": 1e-3, "us": 1e-6}
# flags that leave a row out of the scores, and why
LEFT_OUT = {
    "layout_inconsistent": "TP x PP x DP does not match the NeuronCores of its nodes (its throughput needs every "
                           "core): estimated with dp = cores / (tp x pp), shown, not scored",
    "mfu_inconsistent": "its MFU column disagrees with its own throughput, so which figure is right is unclear: "
                        "kept in the noise floor of its repeats, not scored",
    "speculative_decoding": "speculative decoding with a draft model: not a plain decode step",
    "csv_seq_suspect": "the sequence length is ambiguous (the table says 128, the tutorial 512): "
                       "estimated at 512, shown, not scored",
}
KERNEL_LEFT_OUT = ("the tutorial's latency (about 2 ms for a 1.2 MB layer norm) is ~100x what the kernel's data "
                   "movement and instructions take; it times the tutorial's per-row loop and harness, which no "
                   "estimate of the op's work models")


# The software stack each published row ran, as its source names it: (what it is, whether it is one of the tuned
# stacks the estimate's default recipe stands for). A row is judged against its own stack's population, so a tuned
# stack's error is not hidden by (or blamed on) a third party's. stack_of() says which source text picks which.
STACKS = {
    "nxd": ("NeuronX Distributed training, AWS's tuned Megatron-style recipes", True),
    "nemo-megatron": ("neuronx-nemo-megatron training, AWS's NeMo port on NeuronX Distributed", True),
    "transformers-neuronx": ("Transformers NeuronX serving, AWS's tuned decoder inference (trn1 tables)", True),
    "nxd-inference": ("NxD Inference, AWS's tuned inference library (trn2 tutorials)", True),
    "megatron-lm-reference": ("AWS's early reference port of Megatron-LM (SDK 2.5-2.6)", False),
    "hf-torch-neuronx": ("Hugging Face scripts on torch-neuronx with data parallelism only", False),
    "optimum-neuron": ("Hugging Face optimum-neuron's vLLM benchmark, a third party's serving stack", False),
    "unstated": ("the source names no framework (rows calibrated on before the set was collected)", False),
    "nccom-test": ("the Neuron collectives benchmark tool", True),
    "nki": ("an NKI kernel, timed by its tutorial", True),
}


def stack_of(row: dict) -> str:
    """The stack a row ran, read from its source: the framework column of training tables, the library column
    of the trn1 inference tables, the repository or path of the others."""
    framework = str(row["extra"].get("framework") or "").lower()
    source = row.get("source", {})
    where = f"{source.get('repo', '')}/{source.get('path', '')}".lower()
    if row["kind"] == "collective":
        return "nccom-test"
    if row["kind"] == "kernel":
        return "nki"
    for text, stack in (("neuronx-distributed", "nxd"), ("nemo-megatron", "nemo-megatron"),
                        ("megatron-lm", "megatron-lm-reference"), ("hf ", "hf-torch-neuronx")):
        if text in framework:
            return stack
    if "transformers neuronx" in row["quote"].lower():
        return "transformers-neuronx"
    if "optimum-neuron" in where:
        return "optimum-neuron"
    if "nxd-inference" in where:
        return "nxd-inference"
    if row["id"].startswith("P"):
        return "unstated"
    raise ValueError(f"row {row['id']}: no stack recognised in its source ({where}) or framework ({framework!r}): "
                     "add the rule to stack_of()")


@dataclass
class Case:
    row: dict
    hardware: str
    kind: str
    family: str = ""
    published: float = 0.0
    estimate: float | None = None
    excluded: str = ""
    detail: str = ""
    prepared: object = None        # run.Prepared, priced again when an assumption is refitted
    price: object = None           # for collective and kernel rows: () -> seconds
    label: str = ""
    stack: str = ""                # the software stack the row ran (STACKS)

    @property
    def error(self) -> float | None:
        return None if self.estimate is None else self.estimate / self.published - 1

    @property
    def scored(self) -> bool:
        return not self.excluded and self.estimate is not None


def _dtype(workload: dict) -> str:
    return "fp32" if str(workload.get("dtype", "")).strip().upper() == "FP32" else "bf16"


def _weights(workload: dict) -> str | None:
    text = str(workload.get("dtype", "")).lower()
    return "int8" if "weights int8" in text else "fp8" if "fp8 weights" in text else None


def _recompute(layout: dict) -> str:
    """The row's activation checkpointing: full, selective, or none (stated so, or not stated at all)."""
    stated = str(layout.get("activation_checkpointing") or "none")
    return "full" if stated.startswith("full") else "selective" if stated.startswith("selective") else "none"


def _target(row: dict):
    return chip("trn2" if row["hardware"].startswith("trn2") else "trn1")


def model_case(row: dict) -> Case:
    kind, layout, workload = row["kind"], row["layout"], row["workload"]
    target = _target(row)
    config = MODELS[row["model"]]
    case = Case(row, target.name, kind, family=next(v for k, v in FAMILY.items() if config.startswith(k)),
                published=row["value"] * UNIT[row["unit"]])
    case.excluded = next((LEFT_OUT[f] for f in row["flags"] if f in LEFT_OUT), "")
    _, arch = architecture.load(str(CONFIGS / f"{config}.json"))
    if kind == "train":
        seq = 512 if "csv_seq_suspect" in row["flags"] else (workload.get("seq") or 2048)
        seq = arch.image_tokens or seq   # an image model's sequence is its patches
        dp = None if "layout_inconsistent" in row["flags"] else layout["dp"]
        request = plan.Request(mode="train", dtype=_dtype(workload), micro_batch=workload["micro_batch"],
                               global_batch=workload["global_batch"], seq=seq, zero1=bool(layout.get("zero1")),
                               recompute=_recompute(layout))
        grid = Layout.make(target, layout["nodes"], layout["tp"], layout["pp"], dp)
        case.detail = (f"{layout['nodes']} node(s), tp={layout['tp']} pp={layout['pp']} dp={grid.dp}, mb "
                       f"{request.micro_batch}, gbs {request.global_batch}, seq {seq}, {request.recompute} recompute"
                       + (", ZeRO-1" if request.zero1 else ""))
    else:
        # a served model is compiled for a fixed batch: every decode step runs (pads to) that batch, and the
        # request's prompt is prefilled as it comes
        compiled = workload.get("compiled_batch_size")
        request = plan.Request(mode=kind, batch=workload["batch"], compiled_batch=compiled,
                               input_len=workload["input_len"], output_len=workload["output_len"],
                               weights=_weights(workload))
        grid = Layout.make(target, layout["nodes"], layout["tp"], 1, 1)
        case.detail = (f"tp={layout['tp']}, batch {request.batch}{f' (compiled for {compiled})' if compiled else ''}, "
                       f"{request.input_len} in / {request.output_len} out" + (f", {request.weights} weights"
                                                                              if request.weights else ""))
    key = (config, target.name, grid.nodes, grid.tp, grid.pp, grid.dp, request)
    if key not in _PREPARED:   # repeat releases of one configuration are traced once
        _PREPARED[key] = run.prepare(arch, target, grid, request)
    case.prepared = _PREPARED[key]
    return case


_PREPARED = {}


def collective_case(row: dict) -> Case:
    target = _target(row)
    kind = "all_reduce" if "all-reduce" in row["model"] else "all_gather"
    ranks, nbytes = row["layout"]["ranks"], row["workload"]["message_bytes"]
    case = Case(row, target.name, "collective", family="nccom-test", published=row["value"] * UNIT[row["unit"]],
                detail=f"{kind.replace('_', '-')} of {nbytes:,} B over {ranks} ranks on {row['layout']['nodes']} node(s)")
    case.price = lambda: collectives.c10d_seconds(target, kind, nbytes, ranks)
    return case


def kernel_cases(row: dict) -> list[Case]:
    import torch

    target = chip("trn1")
    if row["id"] == "P6":   # the NKI tutorial's blocked GEMM, by the cycle model and by the op cost model
        import nki
        from matmul import matmul_blocked

        m, k, n = 4096, 8192, 8192
        cycle = nki.benchmark(matmul_blocked, numerics=False)(nki.ShapeOnly((k, m), "bfloat16"),
                                                             nki.ShapeOnly((k, n), "bfloat16")).latency_ms * 1e-3
        a, b = torch.empty(m, k, dtype=torch.bfloat16, device="meta"), torch.empty(k, n, dtype=torch.bfloat16, device="meta")
        out = torch.empty(m, n, dtype=torch.bfloat16, device="meta")
        published = row["value"] * UNIT[row["unit"]]
        return [Case(row, "trn1", "kernel", "NKI", published, detail="the kernel run by the NKI cycle model",
                     price=lambda: cycle, label="P6 (cycle model)"),
                Case(row, "trn1", "kernel", "NKI", published, detail="aten::mm priced by the op cost model",
                     price=lambda: op_work(target, "aten::mm", [a, b], [out]).compute_s, label="P6 (op cost model)")]
    x = torch.empty(300, 1000, dtype=torch.float32, device="meta")
    from localneuron.costmodel.ops import eager_seconds
    return [Case(row, "trn1", "kernel", "NKI", row["value"] * UNIT[row["unit"]], excluded=KERNEL_LEFT_OUT,
                 detail="aten::native_layer_norm (300 x 1000 fp32) priced by the op cost model",
                 price=lambda: eager_seconds(target, "aten::native_layer_norm", [x], [x]))]


def build_cases(rows: list) -> list[Case]:
    cases = []
    for row in rows:
        started = time.perf_counter()
        if row["kind"] == "collective":
            cases.append(collective_case(row))
        elif row["kind"] == "kernel":
            cases += kernel_cases(row)
        else:
            cases.append(model_case(row))
        for case in cases:
            case.stack = case.stack or stack_of(case.row)
        print(f"  traced {row['id']} {row['model']} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return cases


def price(cases: list[Case]) -> None:
    """Every case's estimate under the assumptions as they stand."""
    for case in cases:
        case.estimate = case.prepared.answer()[METRIC[case.kind]] if case.prepared is not None else case.price()


def _group(case: Case) -> str:
    return case.row.get("config_group") or case.row["id"]


def scores(cases: list[Case]) -> dict:
    """(hardware, kind) and ("all", kind) -> mean absolute error, worst row, count over the scored rows."""
    out = {}
    for key in sorted({(c.hardware, c.kind) for c in cases} | {("all", c.kind) for c in cases}):
        members = [c for c in cases if c.scored and c.kind == key[1] and key[0] in ("all", c.hardware)]
        if members:
            worst = max(members, key=lambda c: abs(c.error))
            out[key] = {"mae": statistics.fmean(abs(c.error) for c in members), "worst": abs(worst.error),
                        "worst_row": worst.label or worst.row["id"], "rows": len(members)}
    return out


# --- the cross-validation -----------------------------------------------------------------------------
# the assumptions fitted to the rows (the others are published figures); each with the values searched
FITTED = {"COLLECTIVE_STEP_S": [s * 1e-6 for s in (1.3, 2.0, 2.6, 3.2, 4.0, 5.0, 6.5, 8.0)],
          "COLLECTIVE_START_S": [s * 1e-6 for s in (0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0)],
          "COLLECTIVE_LAUNCH_S": [s * 1e-6 for s in (20.0, 35.0, 51.6, 70.0, 90.0)]}


@contextlib.contextmanager
def assumed(values: dict):
    saved = {name: getattr(assumptions, name) for name in values}
    for name, value in values.items():
        setattr(assumptions, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(assumptions, name, value)


def _objective(cases: list[Case]) -> float:
    """Mean over kinds of each kind's mean absolute error (every kind counts the same)."""
    per_kind = {}
    for c in cases:
        if c.scored:
            per_kind.setdefault(c.kind, []).append(abs(c.error))
    return statistics.fmean(statistics.fmean(v) for v in per_kind.values())


def fit(cases: list[Case]) -> dict:
    """The fitted assumptions' values minimising _objective over `cases` (coordinate search)."""
    best = {name: getattr(assumptions, name) for name in FITTED}
    for _ in range(2):
        for name, grid in FITTED.items():
            trials = []
            for value in grid:
                with assumed({**best, name: value}):
                    price(cases)
                    trials.append((_objective(cases), value))
            best[name] = min(trials)[1]
    return best


def held_out_errors(cases: list[Case]) -> dict[int, float]:
    """Each scored case's error when the fitted assumptions are fitted without its configuration group (every
    release of the same configuration left out together, so a repeat measurement cannot leak into its own
    score): id(case) -> error. This is the selection score and the error the trust line quotes."""
    errors = {}
    for group in sorted({_group(c) for c in cases if c.scored}):
        held = [c for c in cases if _group(c) == group]
        with assumed(fit([c for c in cases if _group(c) != group])):
            price(held)
            errors.update({id(c): c.error for c in held if c.scored})
    price(cases)
    return errors


def faster(case: Case, error: float) -> float:
    """An error signed as optimism (positive: the estimate is faster than the published run): training rows
    compare throughput, where too high is too fast; the others time, where too low is."""
    return error if case.kind == "train" else -error


def spread(members: list[Case]) -> float | None:
    """The largest spread (max/min - 1) between repeat releases of one configuration among `members`."""
    groups = {}
    for c in members:
        groups.setdefault(_group(c), []).append(c.published)
    spreads = [max(v) / min(v) - 1 for v in groups.values() if len(v) > 1]
    return max(spreads) if spreads else None


def population_scores(cases: list[Case], held_out: dict[int, float]) -> dict:
    """(hardware, kind, stack) -> rows, mean absolute error, bias (+: priced faster than published), worst row,
    the same when the row's configuration was left out of the fit, and the repeat-release spread; with
    (hardware, kind, "tuned stacks") over the tuned stacks' rows and (hardware, kind, "all stacks")."""
    out = {}
    keys = {(c.hardware, c.kind, c.stack) for c in cases if c.scored}
    keys |= {(h, k, "tuned stacks") for h, k, st in keys if STACKS[st][1]} | {(h, k, "all stacks") for h, k, _ in keys}
    for hardware, kind, stack in sorted(keys):
        members = [c for c in cases if c.scored and (c.hardware, c.kind) == (hardware, kind)
                   and (stack == c.stack or stack == "all stacks" or (stack == "tuned stacks" and STACKS[c.stack][1]))]
        worst = max(members, key=lambda c: abs(c.error))
        entry = {"rows": len(members), "mae": statistics.fmean(abs(c.error) for c in members),
                 "bias": statistics.fmean(faster(c, c.error) for c in members),
                 "worst": abs(worst.error), "worst_row": worst.label or worst.row["id"], "spread": spread(members),
                 "stacks": sorted({c.stack for c in members})}
        if all(id(c) in held_out for c in members):
            entry["held_out_mae"] = statistics.fmean(abs(held_out[id(c)]) for c in members)
            entry["held_out_bias"] = statistics.fmean(faster(c, held_out[id(c)]) for c in members)
        out[(hardware, kind, stack)] = entry
    return out


def cross_validate(cases: list[Case], by) -> list[dict]:
    """For each group (`by(case)`), fit on the other rows and score the group's rows."""
    results = []
    for group in sorted({by(c) for c in cases if c.scored}):
        train = [c for c in cases if by(c) != group]
        held = [c for c in cases if by(c) == group]
        values = fit(train)
        with assumed(values):
            price(held)
            errors = [abs(c.error) for c in held if c.scored]
        results.append({"group": group, "rows": len(errors), "mae": statistics.fmean(errors),
                        "worst": max(errors), "fitted": values})
    price(cases)
    return results


# --- the report --------------------------------------------------------------------------------------
KIND_NAMES = {"train": "training", "prefill": "prefill (TTFT)", "decode": "decode (TPOT)", "collective": "collective",
              "kernel": "kernel"}


def _value(case: Case, seconds: float) -> str:
    if case.kind == "train":
        return f"{seconds:,.4g} seq/s"
    return f"{seconds * 1e3:.4g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.4g} us"


def _row_line(case: Case) -> str:
    error = "" if case.error is None else f"{100 * case.error:+.1f}%"
    flags = ", ".join(f for f in case.row.get("flags", []) if len(f) < 30)
    return (f"| {case.label or case.row['id']} | {case.hardware} | {case.kind} | {case.stack} | {case.row['model']} | "
            f"{case.detail} | "
            f"{_value(case, case.published)} | {_value(case, case.estimate)} | {error} | {flags} |")


def _percent(value: float | None, signed: bool = False) -> str:
    return "" if value is None else f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def render(cases: list[Case], table: dict, populations: dict, folds: dict) -> str:
    lines = ["# Calibration of the cost model against published Trainium results", "",
             "Generated by `python3 benchmarks/calibration.py`; do not edit by hand. Rows: "
             "`benchmarks/published-trainium-rows.json` (each with its source, the quoted table line, the layout and "
             "the workload; P1-P6 are the seven rows calibrated on before the set was collected). Model "
             "architectures: `benchmarks/configs/` (public config facts). Estimates use the default path of "
             "`localneuron estimate --hf-config` (the model as a tuned recipe runs it). Only these rows chose the "
             "model's assumptions; other published rows judge it.", "",
             "## Mean absolute error and worst row, per hardware and kind", "",
             "| hardware | kind | rows | mean abs error | worst row |", "|---|---|---:|---:|---|"]
    for (hardware, kind), s in table.items():
        lines.append(f"| {hardware} | {KIND_NAMES[kind]} | {s['rows']} | {100 * s['mae']:.1f}% | "
                     f"{s['worst_row']} ({100 * s['worst']:.1f}%) |")
    within = [c for c in cases if c.scored]
    inside = sum(abs(c.error) <= 0.25 for c in within)
    lines += ["", f"{inside} of {len(within)} scored rows are within 25%; targets: mean absolute error at most 10% per "
              "kind, every row within 25%.", "",
              "## Per generation, kind and software stack", "",
              "Each row is judged against the stack it ran (its source names it; `stack_of()` in the script says how "
              "the name is read). Bias: the mean error signed as optimism (positive: the estimate is faster "
              "than the published run; negative: slower). Held out: the same rows, each priced with the fitted assumptions refitted "
              "without its configuration (every release of it): the error to expect on a configuration the model "
              "was not fitted to. Repeat spread: the largest spread between releases of one configuration in the "
              "population, the noise floor beside the error.", "",
              "| hardware | kind | stack | rows | mean abs error | bias | worst row | held out: mean abs error | "
              "held out: bias | repeat spread |", "|---|---|---|---:|---:|---:|---|---:|---:|---:|"]
    for (hardware, kind, stack), p in populations.items():
        if stack.endswith(" stacks") and (len(p["stacks"]) == 1 or (
                stack == "tuned stacks" and p["stacks"] == populations[(hardware, kind, "all stacks")]["stacks"])):
            continue   # the same rows as the one stack (or every stack) shown
        name = stack if stack.endswith(" stacks") else f"{stack}{'' if STACKS[stack][1] else ' (not tuned)'}"
        lines.append(f"| {hardware} | {KIND_NAMES[kind]} | {name} | {p['rows']} | {_percent(p['mae'])} | "
                     f"{_percent(p['bias'], True)} | {p['worst_row']} ({_percent(p['worst'])}) | "
                     f"{_percent(p.get('held_out_mae'))} | {_percent(p.get('held_out_bias'), True)} | "
                     f"{_percent(p['spread'])} |")
    lines += ["", "The stacks: " + "; ".join(f"`{name}`: {what}{'' if tuned else ' (not tuned)'}"
                                               for name, (what, tuned) in STACKS.items()) + ".", "",
              "## Every row", "", "Time rows compare seconds; training rows compare sequences (or images) per second.", "",
              "| row | hw | kind | stack | model | layout and workload | published | estimate | error | flags |",
              "|---|---|---|---|---|---|---:|---:|---:|---|"]
    lines += [_row_line(c) for c in cases if not c.excluded]
    lines += ["", "## Rows left out of the scores, and why", "",
              "| row | model | published | estimate | error | why |", "|---|---|---:|---:|---:|---|"]
    for c in cases:
        if c.excluded:
            error = "" if c.error is None else f"{100 * c.error:+.1f}%"
            lines.append(f"| {c.row['id']} | {c.row['model']} ({c.detail}) | {_value(c, c.published)} | "
                         f"{_value(c, c.estimate)} | {error} | {c.excluded} |")
    lines += ["", "## Repeat releases of one configuration: the noise floor", "",
              "Several releases of the SDK published the same configuration; their spread is how far apart two "
              "measurements of one setup are, so no estimate can be held to less.", "",
              "| configuration | releases | published values | spread (max/min - 1) |", "|---|---:|---|---:|"]
    groups = {}
    for c in cases:
        groups.setdefault(_group(c), []).append(c)
    for members in groups.values():
        if len(members) > 1:
            values = sorted(c.published for c in members)
            lines.append(f"| {members[0].row['model']} ({members[0].detail}) | {len(members)} | "
                         f"{', '.join(_value(members[0], v) for v in values)} | {100 * (values[-1] / values[0] - 1):.1f}% |")
    if folds:
        lines += ["", "## Cross-validation: how the model does on rows it was not fitted to", "",
                  "The fitted assumptions (" + ", ".join(FITTED) + ") are refitted on all rows but one group, and "
                  "the group's rows scored (mean over kinds of each kind's mean absolute error is what the fit "
                  "minimises). Leaving out one configuration at a time (with its repeat releases) is the selection "
                  "score: the held-out columns above. Leaving out a whole model family asks more: how the model does "
                  "on an architecture it was never fitted to.", ""]
        for name, results in folds.items():
            lines += [f"### Leave one {name} out", "", "| left out | rows | mean abs error | worst | refitted |",
                      "|---|---:|---:|---:|---|"]
            for r in results:
                fitted = ", ".join(f"{k.lower()} {v * 1e6:.3g} us" for k, v in r["fitted"].items())
                lines.append(f"| {r['group']} | {r['rows']} | {100 * r['mae']:.1f}% | {100 * r['worst']:.1f}% | {fitted} |")
            overall = statistics.fmean(r["mae"] for r in results)
            lines += ["", f"Mean over the left-out groups: {100 * overall:.1f}%.", ""]
    lines += ["", "## What the model assumes about well-compiled code", "",
              "- A GEMM reaches the fraction of the tile-level matmul rate that the NKI cycle model measures for a "
              "well-blocked kernel of its shape (localneuron/costmodel/gemm_efficiency.py; row P6).",
              f"- A collective step costs {assumptions.COLLECTIVE_STEP_S * 1e6:.3g} us; a collective issued on its "
              f"own also pays a {assumptions.COLLECTIVE_LAUNCH_S * 1e6:.3g} us launch (fitted on all rows; the "
              "nccom-test rows R269 and R274 fix them alone).",
              f"- A collective step between instances also pays EFA's latency, {assumptions.EFA_LATENCY_S * 1e6:.0f} us.",
              *[f"- {rule}" for rule in assumptions.RULES], ""]
    return "\n".join(lines)


def _rounded(value):
    return round(value, 4) if isinstance(value, float) else value


def coverage(cases: list[Case], table: dict, populations: dict) -> dict:
    """What each (hardware, kind) of model rows covers, with its error (in sample, and held out: what the trust
    line quotes) and its bias, per stack too: calibration.json."""
    out = {}
    for (hardware, kind), s in table.items():
        if hardware == "all" or kind in ("collective", "kernel"):
            continue
        members = [c for c in cases if c.scored and c.hardware == hardware and c.kind == kind]
        answers = [c.prepared.answer() for c in members]
        everything = populations[(hardware, kind, "all stacks")]
        entry = {"rows": s["rows"], "mae": round(s["mae"], 4), "worst": round(s["worst"], 4),
                 "held_out_mae": _rounded(everything.get("held_out_mae")), "bias": _rounded(everything["bias"]),
                 "stacks": {stack: {name: _rounded(p.get(name)) for name in ("rows", "mae", "held_out_mae", "bias", "worst")}
                            for (h, k, stack), p in populations.items()
                            if (h, k) == (hardware, kind) and stack != "all stacks"},
                 "families": sorted({a["model"]["model_type"] for a in answers}),
                 "moe": any(a["model"]["experts"] for a in answers),
                 "dtypes": sorted({a["request"]["dtype"] for a in answers})}
        for name in ("tp", "pp", "nodes", "lnc"):
            entry[name] = sorted({a["layout"][name] for a in answers})
        for name in (("seq", "micro_batch") if kind == "train" else ("batch", "compiled_batch", "input_len", "output_len")):
            values = [a["request"][name] for a in answers]
            entry["batch" if name == "micro_batch" else name] = [min(values), max(values)]
        out[f"{hardware} {kind}"] = entry
    return out


def evaluate(rows_path: Path = ROWS) -> tuple[list[Case], dict]:
    """Every calibration row estimated and scored (what tests/estimate/test_calibration.py recomputes)."""
    cases = build_cases(json.loads(rows_path.read_text())["rows"])
    price(cases)
    return cases, scores(cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-cv", action="store_true",
                        help="skip the cross-validation: print the page without the held-out errors, write nothing")
    args = parser.parse_args()
    cases, table = evaluate()
    if args.no_cv:   # a quick look: the files need the held-out errors, so they are left as they are
        print(render(cases, table, population_scores(cases, {}), {}))
        return
    held_out = held_out_errors(cases)
    populations = population_scores(cases, held_out)
    folds = {"model family": cross_validate(cases, lambda c: c.family)}
    text = render(cases, table, populations, folds)
    print(text)
    DOC.write_text(text)
    TABLE.write_text(json.dumps({"generated_by": "benchmarks/calibration.py",
                                 "kinds": coverage(cases, table, populations)}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
