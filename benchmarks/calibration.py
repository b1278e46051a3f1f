"""Compares `localneuron estimate` (its default path: the model as a tuned recipe runs it) with every
published Trainium result of the calibration set, benchmarks/published-trainium-rows.json, and writes
docs/calibration.md (each row: published, estimate, error; mean absolute error and worst row per
hardware, kind and stack; the rows left out and why; repeat releases as a noise floor; what was fitted; the
cross-validation), localneuron/costmodel/fitted_table.py (everything fitted: the collective latencies and each
stack's efficiencies per generation, with the rows that fixed them) and localneuron/estimate/calibration.json (what
each kind covers and its error: the trust line every estimate prints). Calibration rows only: other published
results judge the model and are deliberately not used here.

    python3 benchmarks/calibration.py            # refits; rewrites fitted_table.py, docs/calibration.md, calibration.json
    python3 benchmarks/calibration.py --no-cv    # print the page as the written table prices it; writes nothing
    python3 benchmarks/calibration.py --explain R078 R223   # those rows' estimates term by term; writes nothing
"""
import argparse
import contextlib
import dataclasses
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

from localneuron.costmodel import assumptions, collectives, engines, stacks  # noqa: E402
from localneuron.costmodel.engines import op_work  # noqa: E402
from localneuron.costmodel.hardware import chip  # noqa: E402
from localneuron.estimate import architecture, plan, run  # noqa: E402
from localneuron.estimate.trust import EVERY_ROW  # noqa: E402
from localneuron.estimate.layout import Layout  # noqa: E402

ROWS = ROOT / "benchmarks" / "published-trainium-rows.json"
CONFIGS = ROOT / "benchmarks" / "configs"
DOC = ROOT / "docs" / "calibration.md"
TABLE = ROOT / "localneuron" / "estimate" / "calibration.json"
FITTED_TABLE = ROOT / "localneuron" / "costmodel" / "fitted_table.py"

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


# The software each published row ran, as its source names it: its population. A row is judged against the stacks
# (localneuron/costmodel/stacks.py, what --stack names) that its population and kind stand for, priced with that
# stack's efficiencies, so a tuned stack's error is not hidden by (or blamed on) a third party's. population_of() says
# which source text picks which population.
POPULATIONS = {
    "nxd": "NeuronX Distributed training, AWS's tuned Megatron-style recipes",
    "nemo-megatron": "neuronx-nemo-megatron training, AWS's NeMo port on NeuronX Distributed",
    "transformers-neuronx": "Transformers NeuronX serving, AWS's decoder inference library (trn1 tables)",
    "nxd-inference": "NxD Inference, AWS's tuned inference library (trn2 tutorials)",
    "megatron-lm-reference": "AWS's early reference port of Megatron-LM (SDK 2.5-2.6)",
    "hf-torch-neuronx": "Hugging Face scripts on torch-neuronx with data parallelism only",
    "optimum-neuron": "Hugging Face optimum-neuron's vLLM benchmark, a third party's serving stack",
    "unstated": "the source names no framework (rows calibrated on before the set was collected)",
    "nccom-test": "the Neuron collectives benchmark tool (hardware: no stack's efficiencies apply)",
    "nki": "an NKI kernel, timed by its tutorial (hardware: no stack's efficiencies apply)",
}
HARDWARE_POPULATIONS = ("nccom-test", "nki")


def population_of(row: dict) -> str:
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
                     "add the rule to population_of()")


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
    population: str = ""           # the software the row ran (POPULATIONS)
    stack: str = ""                # the stack (costmodel/stacks.py) it is priced and judged as
    primary: bool = True           # the first stack its population stands for: the row's one vote in shared scores

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


# rows whose source compiled the context encoding for a longest prompt shorter than the row's seq (the length their
# prompts are bucketed up to, stacks.prompt_tokens()): the NxD
# Inference Llama-3.3-70B tutorial (libraries/nxd-inference/tutorials/trn2-llama3.3-70b-tutorial.rst at the rows'
# commits) compiles with --max-context-length 12288 --seq-len 12800 --enable-bucketing
MAX_CONTEXT = {"R215": 12288, "R217": 12288}


def model_case(row: dict, stack: str) -> Case:
    kind, layout, workload = row["kind"], row["layout"], row["workload"]
    target = dataclasses.replace(_target(row), stack=stack)
    config = MODELS[row["model"]]
    case = Case(row, target.name, kind, family=next(v for k, v in FAMILY.items() if config.startswith(k)),
                published=row["value"] * UNIT[row["unit"]], stack=stack)
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
        # the sequence length the serving graphs were compiled for (the row's seq), given where the stack compiles
        # for that one length (stacks.compiled_tokens): elsewhere the prompt runs as it comes
        # (or pads a prompt to its context-encoding buckets, stacks.prompt_tokens(): a decode step is not padded)
        padded = (stacks.STACKS[stack].pads_to_compiled_length or stacks.STACKS[stack].context_buckets) and workload.get("seq")
        if kind == "decode" and not stacks.STACKS[stack].pads_to_compiled_length:
            padded = False
        request = plan.Request(mode=kind, batch=workload["batch"], compiled_batch=compiled,
                               input_len=workload["input_len"], output_len=workload["output_len"],
                               weights=_weights(workload),
                               compiled_seq=MAX_CONTEXT.get(row["id"], workload["seq"]) if padded else None)
        grid = Layout.make(target, layout["nodes"], layout["tp"], 1, 1)
        case.detail = (f"tp={layout['tp']}, batch {request.batch}{f' (compiled for {compiled})' if compiled else ''}, "
                       f"{request.input_len} in / {request.output_len} out"
                       + (f" (compiled for {request.compiled_seq} tokens)" if request.compiled_seq else "")
                       + (f", {request.weights} weights" if request.weights else ""))
    key = (config, target.name, target.stack, grid.nodes, grid.tp, grid.pp, grid.dp, request)
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
                     price=_at_hardware_rate(lambda: op_work(target, "aten::mm", [a, b], [out]).compute_s),
                     label="P6 (op cost model)")]
    x = torch.empty(300, 1000, dtype=torch.float32, device="meta")
    from localneuron.costmodel.ops import eager_seconds
    return [Case(row, "trn1", "kernel", "NKI", row["value"] * UNIT[row["unit"]], excluded=KERNEL_LEFT_OUT,
                 detail="aten::native_layer_norm (300 x 1000 fp32) priced by the op cost model",
                 price=_at_hardware_rate(lambda: eager_seconds(target, "aten::native_layer_norm", [x], [x])))]


def _at_hardware_rate(price):
    """A kernel row's price with no stack's efficiencies: the kernel is what it is, whatever stack runs around it."""
    def priced():
        with stacks.refitted({}):
            return price()
    return priced


def build_cases(rows: list) -> list[Case]:
    """Every row as a case: a model row once per stack its population stands for (the tuned recipe's rows once
    as the default stack and once as their own library, when that is a stack too)."""
    cases = []
    for row in rows:
        started = time.perf_counter()
        population = population_of(row)
        if row["kind"] == "collective":
            made = [collective_case(row)]
        elif row["kind"] == "kernel":
            made = kernel_cases(row)
        else:
            judged = stacks.judged_by(population, row["kind"]) or [stacks.DEFAULT]
            made = [model_case(row, stack) for stack in judged]
            for case in made[1:]:
                case.primary = False
        for case in made:
            case.population = population
            case.stack = case.stack or population
        cases += made
        print(f"  traced {row['id']} {row['model']} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return cases


def price(cases: list[Case]) -> None:
    """Every case's estimate under the assumptions as they stand."""
    for case in cases:
        case.estimate = case.prepared.metric(METRIC[case.kind]) if case.prepared is not None else case.price()


def _group(case: Case) -> str:
    return case.row.get("config_group") or case.row["id"]


def scores(cases: list[Case]) -> dict:
    """(hardware, kind) and ("all", kind) -> mean absolute error, worst row, count over the scored rows, each row
    once, judged as its primary stack."""
    out = {}
    for key in sorted({(c.hardware, c.kind) for c in cases} | {("all", c.kind) for c in cases}):
        members = [c for c in cases if c.scored and c.primary and c.kind == key[1] and key[0] in ("all", c.hardware)]
        if members:
            worst = max(members, key=lambda c: abs(c.error))
            out[key] = {"mae": statistics.fmean(abs(c.error) for c in members), "worst": abs(worst.error),
                        "worst_row": worst.label or worst.row["id"], "rows": len(members)}
    return out


# --- the fit and the cross-validation -------------------------------------------------------------------
# What is fitted to the rows (everything else is a published figure): the collective latencies (assumptions.py),
# shared by every stack, and each stack's efficiencies per generation (costmodel/stacks.py), each searched over
# these values, within the bounds stacks.PARAMETERS gives (and a latency no lower than a DMA transfer's 1.3 us).
COLLECTIVE_GRIDS = {"COLLECTIVE_STEP_S": [s * 1e-6 for s in (1.3, 2.0, 2.6, 3.2, 4.0, 5.0, 6.5, 8.0)],
                    "COLLECTIVE_START_S": [s * 1e-6 for s in (0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0)],
                    "COLLECTIVE_LAUNCH_S": [s * 1e-6 for s in (20.0, 35.0, 51.6, 70.0, 90.0)]}
EFFICIENCY_GRIDS = {
    "matmul": (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0),
    "hbm": (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0),
    "request_s": (0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1),
    "decode_layer_s": (0.0, 5e-6, 1e-5, 1.5e-5, 2e-5, 2.5e-5, 3e-5, 4e-5, 5e-5, 6e-5, 8e-5, 1e-4),
}


@dataclass
class Fit:
    collectives: dict      # assumptions.py name -> seconds
    efficiencies: dict     # stack -> generation -> parameter -> value
    rows: dict             # stack -> generation -> the ids of the rows the values were fitted on


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


@contextlib.contextmanager
def applied(fitted: Fit):
    with assumed(fitted.collectives), stacks.refitted(fitted.efficiencies):
        yield


def _objective(cases: list[Case]) -> float:
    """Mean over kinds of each kind's mean absolute error (every kind counts the same)."""
    per_kind = {}
    for c in cases:
        if c.scored:
            per_kind.setdefault(c.kind, []).append(abs(c.error))
    return statistics.fmean(statistics.fmean(v) for v in per_kind.values())


# rows of one configuration (repeat releases) count once: a parameter needs this many configurations of its own
CONFIGURATIONS_PER_PARAMETER = 2


def efficiency_groups(cases: list[Case]) -> dict:
    """(stack, generation) -> (the parameters its scored rows can fix, the rows). A parameter is fitted where the
    rows' kinds move it, and only as many as the rows' configurations support (CONFIGURATIONS_PER_PARAMETER each:
    one configuration fits any one parameter exactly, which says nothing), in the order of stacks.PARAMETERS;
    the rest fall back as stacks.py says."""
    groups = {}
    for c in cases:
        if c.scored and c.stack in stacks.STACKS:
            groups.setdefault((c.stack, c.hardware), []).append(c)
    out = {}
    for key, members in sorted(groups.items()):
        moved = [name for name, p in stacks.PARAMETERS.items() if {c.kind for c in members} & set(p.kinds)]
        supported = len({_group(c) for c in members}) // CONFIGURATIONS_PER_PARAMETER
        out[key] = (moved[:supported], members)
    return out


def _search(grid, neutral, objective) -> float:
    """The value of `grid` with the lowest objective; of equal ones, the nearest the neutral value (what the rows
    do not ask for stays as the published figures have it)."""
    return min((objective(value), abs(value - neutral), value) for value in grid)[2]


def fit(cases: list[Case], start: Fit | None = None, rounds: int = 2, only: set | None = None) -> Fit:
    """The collective latencies and the stacks' efficiencies minimising _objective (coordinate search): the
    latencies over every row once (each row's primary case), each stack's efficiencies per generation over the
    rows judged as that stack on that generation. Starts from `start` (else the middle of each latency's grid and
    neutral efficiencies, so the written table does not steer its own refit); `only`: the (stack, generation)
    groups to refit, the others kept as `start` has them."""
    collectives_now = dict(start.collectives) if start else {name: grid[len(grid) // 2] for name, grid in
                                                             COLLECTIVE_GRIDS.items()}
    table = {stack: {g: dict(v) for g, v in per.items()} for stack, per in start.efficiencies.items()} if start else {}
    primary = [c for c in cases if c.primary]
    groups = efficiency_groups(cases)
    rows = {}
    for (stack, generation), (parameters, members) in groups.items():
        if parameters:
            rows.setdefault(stack, {})[generation] = sorted({c.row["id"] for c in members})
    for _ in range(rounds):
        with stacks.refitted(table):
            for name, grid in COLLECTIVE_GRIDS.items():
                def collective_objective(value):
                    with assumed({**collectives_now, name: value}):
                        price(primary)
                        return _objective(primary)
                collectives_now[name] = _search(grid, getattr(assumptions, name), collective_objective)
        with assumed(collectives_now):
            for (stack, generation), (parameters, members) in groups.items():
                if only is not None and (stack, generation) not in only:
                    continue
                for parameter in parameters:
                    def efficiency_objective(value):
                        trial = {**table, stack: {**table.get(stack, {}), generation: {
                            **table.get(stack, {}).get(generation, {}), parameter: value}}}
                        with stacks.refitted(trial):
                            price(members)
                            return _objective(members)
                    value = _search(EFFICIENCY_GRIDS[parameter], stacks.PARAMETERS[parameter].neutral,
                                    efficiency_objective)
                    table.setdefault(stack, {}).setdefault(generation, {})[parameter] = value
    return Fit(collectives_now, table, rows)


def refit_without(cases: list[Case], left_out: list[Case], full: Fit) -> Fit:
    """Everything the left-out rows could have moved, refitted without them as the full fit was made: the collective
    latencies and the efficiencies of their stacks on their generations; the other stacks' efficiencies were fitted
    on other rows only, so they stay as the full fit has them. A group left with no rows keeps no fitted value: its
    stack falls back as stacks.py says."""
    train = [c for c in cases if all(c is not held for held in left_out)]
    touched = {(c.stack, c.hardware) for c in left_out}
    others = {stack: {g: v for g, v in per.items() if (stack, g) not in touched}
              for stack, per in full.efficiencies.items()}
    origin = fit([], rounds=0).collectives
    return fit(train, Fit(origin, others, full.rows), only=touched)


def held_out_errors(cases: list[Case], full: Fit) -> dict[int, float]:
    """Each scored case's error when what is fitted is refitted without its configuration group (every release of
    the same configuration left out together, so a repeat measurement cannot leak into its own score):
    id(case) -> error. This is the selection score and the error the trust line quotes."""
    errors = {}
    for group in sorted({_group(c) for c in cases if c.scored}):
        held = [c for c in cases if _group(c) == group]
        with applied(refit_without(cases, held, full)):
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
    the same when the row's configuration was left out of the fit, and the repeat-release spread, over the rows
    judged as that stack; with (hardware, kind, EVERY_ROW) over every row once, judged as its primary stack."""
    out = {}
    scored = [c for c in cases if c.scored]
    keys = {(c.hardware, c.kind, c.stack) for c in scored} | {(c.hardware, c.kind, EVERY_ROW) for c in scored}
    for hardware, kind, stack in sorted(keys):
        members = [c for c in scored if (c.hardware, c.kind) == (hardware, kind)
                   and (stack == c.stack or (stack == EVERY_ROW and c.primary))]
        worst = max(members, key=lambda c: abs(c.error))
        entry = {"rows": len(members), "mae": statistics.fmean(abs(c.error) for c in members),
                 "bias": statistics.fmean(faster(c, c.error) for c in members),
                 "worst": abs(worst.error), "worst_row": worst.label or worst.row["id"], "spread": spread(members),
                 "stacks": sorted({c.stack for c in members}), "populations": sorted({c.population for c in members})}
        if all(id(c) in held_out for c in members):
            entry["held_out_mae"] = statistics.fmean(abs(held_out[id(c)]) for c in members)
            entry["held_out_bias"] = statistics.fmean(faster(c, held_out[id(c)]) for c in members)
        out[(hardware, kind, stack)] = entry
    return out


def cross_validate(cases: list[Case], by, full: Fit) -> list[dict]:
    """For each group (`by(case)`), refit without it (refit_without) and score the group's rows."""
    results = []
    for group in sorted({by(c) for c in cases if c.scored}):
        held = [c for c in cases if by(c) == group]
        fitted = refit_without(cases, held, full)
        with applied(fitted):
            price(held)
            errors = [abs(c.error) for c in held if c.scored]
        results.append({"group": group, "rows": len(errors), "mae": statistics.fmean(errors),
                        "worst": max(errors), "fitted": fitted.collectives})
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


# the targets, on errors held out: per kind, the default stack's rows and every row, and the bias of every row
TARGETS = {"default stack": 0.10, "every row": 0.20, "bias": 0.05}


def _target_lines(populations: dict) -> list[str]:
    """Each model kind against TARGETS, on the held-out errors (nothing when they were not computed)."""
    def verdict(value, limit, signed=False):
        return "" if value is None else f"{_percent(value, signed)} {'met' if abs(value) <= limit else 'NOT met'}"

    lines = []
    for (hardware, kind, stack), every in populations.items():
        if stack != EVERY_ROW or kind not in METRIC or "held_out_mae" not in every:
            continue
        default = populations.get((hardware, kind, stacks.DEFAULT), {})
        lines.append(f"| {hardware} | {KIND_NAMES[kind]} | "
                     f"{verdict(default.get('held_out_mae'), TARGETS['default stack']) or 'no row'} | "
                     f"{verdict(every['held_out_mae'], TARGETS['every row'])} | "
                     f"{verdict(every['held_out_bias'], TARGETS['bias'], signed=True)} |")
    if not lines:
        return []
    return ["## Targets, on configurations left out of the fit", "",
            f"Mean absolute error at most {100 * TARGETS['default stack']:.0f}% per kind on the rows judged as the "
            f"default stack ({stacks.DEFAULT}), at most {100 * TARGETS['every row']:.0f}% over every row, and no "
            f"kind biased by more than {100 * TARGETS['bias']:.0f}% either way.", "",
            f"| hardware | kind | {stacks.DEFAULT}: held out | every row: held out | every row: held-out bias |",
            "|---|---|---:|---:|---:|", *lines, ""]


def _fitted_lines(fitted: Fit) -> list[str]:
    """The fitted table (localneuron/costmodel/fitted_table.py) as the page shows it, each value with its bounds."""
    lines = ["## What was fitted, and on which rows", "",
             "Each stack's efficiencies per generation, fitted on the rows judged as that stack on that generation "
             "(coordinate search over the values in `EFFICIENCY_GRIDS`, minimising the mean over kinds of the mean "
             "absolute error; of equal fits the one nearest the published figures). A parameter is fitted only where "
             "the rows' kinds move it, and only as many as the rows' configurations support ("
             f"{CONFIGURATIONS_PER_PARAMETER} each, repeat releases counting once, in the order of the columns); "
             "elsewhere a stack takes its value from its nearest fitted generation, then from the default stack. A "
             "value at a bound is a term the model lacks, not a fitted efficiency.", "",
             "| stack | generation | " + " | ".join(stacks.PARAMETERS) + " | rows |",
             "|---|---|" + "---:|" * len(stacks.PARAMETERS) + "---|"]
    for stack, per in fitted.efficiencies.items():
        for generation, values in sorted(per.items()):
            cells = []
            for name, parameter in stacks.PARAMETERS.items():
                value = values.get(name)
                bound = value is not None and value != parameter.neutral and value in (parameter.low, parameter.high)
                cells.append("" if value is None else f"{value:g}{' (at its bound)' if bound else ''}")
            lines.append(f"| {stack} | {generation} | " + " | ".join(cells) + " | "
                         f"{', '.join(fitted.rows[stack][generation])} |")
    lines += ["", "The parameters: " + "; ".join(
        f"`{name}` in [{p.low:g}, {p.high:g}]: {p.meaning}" for name, p in stacks.PARAMETERS.items()) + ".",
        "The collective latencies, shared by every stack: " + ", ".join(
            f"{name.lower()} {value * 1e6:.3g} us" for name, value in fitted.collectives.items()) + ".", ""]
    return lines


def render(cases: list[Case], table: dict, populations: dict, folds: dict, fitted: Fit | None = None) -> str:
    lines = ["# Calibration of the cost model against published Trainium results", "",
             "Generated by `python3 benchmarks/calibration.py`; do not edit by hand. Rows: "
             "`benchmarks/published-trainium-rows.json` (each with its source, the quoted table line, the layout and "
             "the workload; P1-P6 are the seven rows calibrated on before the set was collected). Model "
             "architectures: `benchmarks/configs/` (public config facts). Estimates use the default path of "
             "`localneuron estimate --hf-config` (the model as a tuned recipe runs it), priced as the stack each row "
             "is judged as. Only these rows chose what is fitted; other published rows judge it.", "",
             "## Mean absolute error and worst row, per hardware and kind", "",
             "| hardware | kind | rows | mean abs error | worst row |", "|---|---|---:|---:|---|"]
    for (hardware, kind), s in table.items():
        lines.append(f"| {hardware} | {KIND_NAMES[kind]} | {s['rows']} | {100 * s['mae']:.1f}% | "
                     f"{s['worst_row']} ({100 * s['worst']:.1f}%) |")
    within = [c for c in cases if c.scored and c.primary]
    inside = sum(abs(c.error) <= 0.25 for c in within)
    lines += ["", f"{inside} of {len(within)} scored rows are within 25%.", ""]
    lines += _target_lines(populations)
    lines += [

              "## Per generation, kind and software stack", "",
              "A row is judged as each stack (`localneuron estimate --stack`, localneuron/costmodel/stacks.py) that "
              "the software it ran stands for, priced with that stack's fitted efficiencies: the tuned libraries' rows "
              "as the default stack, `" + stacks.DEFAULT + "`, and, where the library is a stack of its own, as it "
              "too. `population_of()` in the script reads the software from the row's source. Every row: each row "
              "once, as its first stack. Bias: the mean error signed as optimism (positive: the estimate is faster "
              "than the published run; negative: slower). Held out: the same rows, each priced with everything fitted "
              "(the collective latencies and every stack's efficiencies) refitted without its configuration (every "
              "release of it): the error to expect on a configuration the model was not fitted to. Repeat spread: the "
              "largest spread between releases of one configuration among the rows, the noise floor beside the "
              "error.", "",
              "| hardware | kind | stack | rows ran | rows | mean abs error | bias | worst row | held out: mean abs "
              "error | held out: bias | repeat spread |", "|---|---|---|---|---:|---:|---:|---|---:|---:|---:|"]
    for (hardware, kind, stack), p in populations.items():
        if stack == EVERY_ROW and len(p["stacks"]) == 1:
            continue   # the same rows as the one stack shown
        name = stack if stack not in stacks.STACKS else f"{stack}{'' if stacks.STACKS[stack].tuned else ' (not tuned)'}"
        lines.append(f"| {hardware} | {KIND_NAMES[kind]} | {name} | {', '.join(p['populations'])} | {p['rows']} | "
                     f"{_percent(p['mae'])} | {_percent(p['bias'], True)} | {p['worst_row']} ({_percent(p['worst'])}) | "
                     f"{_percent(p.get('held_out_mae'))} | {_percent(p.get('held_out_bias'), True)} | "
                     f"{_percent(p['spread'])} |")
    lines += ["", "The stacks: " + "; ".join(f"`{name}`: {stack.description}{'' if stack.tuned else ' (not tuned)'}"
                                               for name, stack in stacks.STACKS.items()) + ".",
              "", "The software the rows ran: " + "; ".join(f"`{name}`: {what}" for name, what in POPULATIONS.items())
              + ".", ""]
    if fitted is not None:
        lines += _fitted_lines(fitted)
    lines += [
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
                  "Everything fitted (the collective latencies and the stacks' efficiencies) is refitted on all rows "
                  "but one group, and "
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
              f"- A collective starts in {assumptions.COLLECTIVE_START_S * 1e6:.3g} us and each of its steps costs "
              f"{assumptions.COLLECTIVE_STEP_S * 1e6:.3g} us; one issued on its own also pays a "
              f"{assumptions.COLLECTIVE_LAUNCH_S * 1e6:.3g} us launch (fitted on all rows).",
              "- A stack reaches the fractions of the GEMM and HBM rates its fitted efficiencies say, and a serving "
              "stack spends its fitted time on a request before the first forward (above).",
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
        everything = populations[(hardware, kind, EVERY_ROW)]
        entry = {"rows": s["rows"], "mae": round(s["mae"], 4), "worst": round(s["worst"], 4),
                 "held_out_mae": _rounded(everything.get("held_out_mae")), "bias": _rounded(everything["bias"]),
                 "stacks": {stack: {name: _rounded(p.get(name)) for name in ("rows", "mae", "held_out_mae", "bias", "worst",
                                                                             "populations")}
                            for (h, k, stack), p in populations.items()
                            if (h, k) == (hardware, kind)},
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


# --- a row's estimate term by term (--explain) -------------------------------------------------------------
# the figure each kind's schedule result breaks down (prefill: time to first token; decode: time per output token;
# training: the step, of which seq_per_s is the global batch over it)
BREAKDOWN_OF = {"train": "step_s", "prefill": "ttft_s", "decode": "tpot_s"}


def terms(case: Case) -> dict:
    """A model row's priced figure (BREAKDOWN_OF) split by what it is spent on (costmodel/time.py's parts: they add up
    to it), under the assumptions and fitted table as they stand."""
    return dict(case.prepared.priced()["breakdown"])


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _breakdown_text(parts: dict) -> str:
    return ", ".join(f"{name} {_ms(value)}" for name, value in parts.items() if value)


def _op_lines(traced, top: int) -> list[str]:
    """The ops of a traced module's forward, each priced alone by its rule (engine time, FLOPs), the largest first:
    repeats of one op and shape summed."""
    if traced.graphs is None:
        return []
    summed = {}
    for op in traced.graphs.forward:
        inputs = [t for _, t in op.inputs]
        work = op_work(traced.chip, op.name, inputs, [t for _, t in op.outputs])
        shapes = " ".join(str(tuple(t.shape)) for t in inputs[:3])
        key = (op.name, type(engines.rule(op.name)).__name__, shapes)
        calls, seconds, flops = summed.get(key, (0, 0.0, 0.0))
        summed[key] = (calls + 1, seconds + work.compute_s, flops + work.flops)
    ranked = sorted(summed.items(), key=lambda item: -item[1][1])[:top]
    return [f"      {seconds * 1e6:10.1f} us  x{calls} {name} [{rule}] {shapes}  {flops / 1e9:.3g} GFLOP"
            for (name, rule, shapes), (calls, seconds, flops) in ranked]


def explain(case: Case, top: int = 10) -> list[str]:
    """A model row's estimate term by term: the schedule's figure split by what it is spent on (terms()), then the
    stack that figure prices (the prompt, the decode step, the training micro-batch), layer kind by layer kind: its
    forward (and backward), its collectives, and its ops by engine time alone, the largest first. The ops' engine
    times do not add up to the layer's compute: in a compiled graph consecutive element-wise ops are one loop that
    costs its busiest engine (costmodel/ops.py)."""
    if case.prepared is None:
        return [f"{case.row['id']}: a {case.kind} row, priced by its own rule (no model stack to decompose)"]
    estimate = case.prepared.metric(METRIC[case.kind])
    lines = [f"{case.label or case.row['id']} {case.hardware} {case.kind} as {case.stack}: {case.row['model']} "
             f"({case.detail}): published {_value(case, case.published)}, estimate {_value(case, estimate)} "
             f"({100 * (estimate / case.published - 1):+.1f}%)",
             f"  {BREAKDOWN_OF[case.kind]}: {_breakdown_text(terms(case))}"]
    efficiencies = case.prepared.chip.efficiencies
    lines.append("  the stack's fitted efficiencies: " + ", ".join(f"{k} {v:g}" for k, v in vars(efficiencies).items()))
    layout = case.prepared.layout
    for part, stack in case.prepared.parts().items():
        if part != case.kind or stack is None:   # a decode row's figure is the step's, not its prompt's
            continue
        for traced, count in stack.kinds:
            passes = f"forward {_ms(traced.forward.total)} ({_breakdown_text(traced.forward.as_dict())})"
            if part == "train":
                passes += f", backward {_ms(traced.backward.total)} ({_breakdown_text(traced.backward.as_dict())})"
            lines.append(f"  {part}: {count} layer(s) of one kind, each: {passes}; collectives "
                         f"{_ms(plan.collectives_time(layout, traced))}")
            lines += _op_lines(traced, top)
        lines.append(f"  {part}: embedding {_ms(stack.first.forward.total)}, head {_ms(stack.last.forward.total)} "
                     f"(forward)")
    return lines


TABLE_HEADER = '''"""Generated by benchmarks/calibration.py from benchmarks/published-trainium-rows.json; do not edit by hand.
COLLECTIVES: the collective latencies of assumptions.py (seconds); EFFICIENCIES: stack -> generation ->
parameter -> value (costmodel/stacks.py says what each parameter is and its bounds); ROWS: stack ->
generation -> the published rows its values were fitted on."""
'''


def fitted_table_text(fitted: Fit) -> str:
    """localneuron/costmodel/fitted_table.py for `fitted`."""
    return "\n".join([TABLE_HEADER, f"COLLECTIVES = {fitted.collectives!r}", "",
                      f"EFFICIENCIES = {fitted.efficiencies!r}", "", f"ROWS = {fitted.rows!r}", ""])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-cv", action="store_true",
                        help="skip the fit and the cross-validation: print the page as the written table prices it, "
                             "without the held-out errors; writes nothing")
    parser.add_argument("--explain", nargs="+", metavar="ROW",
                        help="print these rows' estimates term by term (explain()), as the written table prices "
                             "them; writes nothing")
    args = parser.parse_args()
    if args.explain:
        rows = [row for row in json.loads(ROWS.read_text())["rows"] if row["id"] in args.explain]
        missing = set(args.explain) - {row["id"] for row in rows}
        if missing:
            parser.error(f"no row {', '.join(sorted(missing))} in {ROWS.name}")
        for case in build_cases(rows):
            print("\n".join(explain(case)), end="\n\n")
        return
    cases, table = evaluate()
    if args.no_cv:   # a quick look: the files need the fit and the held-out errors, so they are left as they are
        print(render(cases, table, population_scores(cases, {}), {}))
        return
    fitted = fit(cases)
    FITTED_TABLE.write_text(fitted_table_text(fitted))
    with applied(fitted):   # the table just written, as the estimate will read it from now on
        price(cases)
        table = scores(cases)
        held_out = held_out_errors(cases, fitted)
        populations = population_scores(cases, held_out)
        folds = {"model family": cross_validate(cases, lambda c: c.family, fitted)}
        text = render(cases, table, populations, folds, fitted)
        kinds = coverage(cases, table, populations)
    print(text)
    DOC.write_text(text)
    TABLE.write_text(json.dumps({"generated_by": "benchmarks/calibration.py", "kinds": kinds},
                                indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
