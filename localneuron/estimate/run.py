"""The one pipeline of `localneuron estimate`: a model source (the tuned recipe from a config's
architecture, the model transformers builds as its code runs, a --model-fn factory) makes the stacks,
the schedules in plan.py price them, and _answer makes the one result every renderer reads."""
from localneuron.costmodel.hardware import Chip
from localneuron.estimate import plan, recipe, trust
from localneuron.estimate.architecture import Architecture
from localneuron.estimate.layout import Layout
from localneuron.estimate.trace import fake_device
from localneuron.costmodel import assumptions, stacks


class Prepared:
    """A model traced for one request, ready to be priced (again, when the calibration refits an
    assumption): answer() schedules its stacks under the assumptions as they stand; parts() names the stacks the
    schedule prices, as it chooses them now (the calibration's --explain decomposes them)."""
    def __init__(self, model: dict, chip: Chip, layout: Layout, request: plan.Request, schedule, parts=None):
        self.model, self.chip, self.layout, self.request, self._schedule = model, chip, layout, request, schedule
        self._parts = parts

    def parts(self) -> dict:
        """What the schedule prices: {"train": stack}, or {"prefill": the prompt's stack, "decode": the step's
        (None when only prefilling)}."""
        return self._parts() if self._parts else {}

    def answer(self) -> dict:
        return _answer(dict(self.model), self._schedule(), self.chip, self.layout, self.request)

    def metric(self, name: str) -> float:
        """One figure of the answer ("step_s", "ttft_s"...), without the rest of it (the calibration's refits)."""
        return self.priced()[name]

    def priced(self) -> dict:
        """The schedule's result as the assumptions price it now (its figures and breakdown, before the answer)."""
        return self._schedule()


def prepare(arch: Architecture, chip: Chip, layout: Layout, request: plan.Request) -> Prepared:
    """The default path: the model as a tuned TorchNeuron recipe runs it (recipe.py), traced."""
    with fake_device():
        if request.mode == "train":
            stack = recipe.train_stack(arch, layout, request)

            def schedule():
                return plan.schedule_train(stack, layout, request)

            def parts():
                return {"train": stack}
        else:
            # the recipe runs the prompt sequence parallel when that is faster (long prompts: the norms
            # shrink by tp; short ones: the ring all-gathers' latency outweighs it)
            # a stack whose graphs are compiled for one sequence length runs every prompt and every step's
            # attention at that length (stacks.compiled_tokens)
            def positions(tokens):
                return stacks.compiled_tokens(chip.stack, tokens, request.compiled_seq)
            prompt = stacks.prompt_tokens(chip.stack, request.input_len, request.compiled_seq)
            prompts = [recipe.inference_stack(arch, layout, request, prompt, 0, sequence_parallel)
                       for sequence_parallel in ((False, True) if layout.tp > 1 else (False,))]
            decode = None
            total = request.input_len
            if request.mode == "decode":
                decode = recipe.inference_stack(arch, layout, request.decoding(), 1,
                                                positions(request.input_len + request.output_len // 2))
                total += request.output_len
            kv_cache = recipe.kv_cache_bytes(arch, layout, request.decoding(), positions(total))

            def prompt():
                return min(prompts, key=lambda stack: plan.schedule_forward(stack, layout).total)

            def schedule():
                return plan.schedule_inference(prompt(), decode, layout, request, kv_cache)

            def parts():
                return {"prefill": prompt(), "decode": decode}
    model = {"model_type": arch.model_type, "built_with": "localneuron's builder: the model as a tuned recipe runs it",
             "recipe": recipe.describe(request), "parameters": arch.parameters, "layers": arch.layers,
             "hidden_size": arch.hidden, "heads": arch.heads, "kv_heads": arch.kv_heads, "vocab_size": arch.vocab,
             "experts": arch.experts.count if arch.experts else 0,
             "moe_layers": len(arch.moe_layers), "active_parameters": arch.active_parameters}
    return Prepared(model, chip, layout, request, schedule, parts)


def estimate(arch: Architecture, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    return prepare(arch, chip, layout, request).answer()


def estimate_hf(config: dict, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    """--as-written: the model transformers builds from the config, priced as its own code runs."""
    from localneuron.estimate import hf

    with fake_device():
        model, result = hf.estimate(config, layout, request)
    return _answer(model, result, chip, layout, request)


def estimate_factory(spec: str, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    """--model-fn: any PyTorch model the factory returns, traced whole."""
    from localneuron.estimate import factory

    with fake_device():
        model, result = factory.estimate(spec, layout, request)
    return _answer(model, result, chip, layout, request)


def estimate_script(script: str, argv: list, chip: Chip, world: int, nodes: int) -> dict:
    """--script: the user's training script, run as a simulated job of `world` ranks (script.py)."""
    from localneuron.estimate import script as script_run

    priced = script_run.estimate(script, argv, chip, world)
    groups = priced["groups"]
    sizes = {desc.removeprefix("mesh_"): len(ranks) for desc, ranks in groups.items()}
    model = {"model_type": "script", "built_with": f"the script {script} ({world} simulated ranks; ranks "
             f"{', '.join(map(str, priced['ranks_executed']))} executed, the others answered for; "
             f"{len(priced['redirected_writes'])} file(s) it wrote went to the dry run's private directory and were "
             f"discarded)", "parameters": priced["parameters"], "groups": sizes,
             "redirected_writes": priced["redirected_writes"]}
    capacity = chip.hbm_bytes_per_core
    answer = {
        "model": model, "target": chip.name,
        "layout": {"nodes": nodes, "world": world, "lnc": chip.lnc, "cores_per_node": chip.cores_per_instance,
                   "tp": sizes.get("tp", 1), "pp": priced["stages"], "dp": world // max(1, sizes.get("tp", 1) *
                                                                             priced["stages"])},
        "request": {"mode": "train", "dtype": "as the script sets it", "script": script, "script_args": argv},
        "step_s": priced["step_s"], "breakdown": priced["breakdown"],
        "collectives": priced["collectives"], "hbm_per_core_bytes": {"peak": priced["peak_bytes"],
                                                                      "total": priced["peak_bytes"]},
        "hbm_capacity_per_core_bytes": capacity, "fits": priced["peak_bytes"] <= capacity,
        "ops": {"cpu_fallbacks": priced["fallbacks"], "computed_in_32bit": priced["computed_in_32bit"]},
        "ranks": priced["rank_results"], "stack": stack_priced(chip), "assumptions": assumption_lines(),
    }
    answer["trust"] = trust.assess(answer)
    return answer


def _answer(model: dict, result: dict, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    traced = result.pop("traced")
    if "compiled_layers" in result:
        result["compile_saves"] = plan.compile_saving(*result.pop("compiled_layers"))
    fallbacks, narrowed = {}, {}
    for t in traced:
        for name, calls in t.fallback_ops.items():
            fallbacks[name] = fallbacks.get(name, 0) + calls
        for name, calls in t.computed_in_32bit.items():
            narrowed[name] = narrowed.get(name, 0) + calls
    capacity = chip.hbm_bytes_per_core
    memory = result["hbm_per_core_bytes"]
    answer = {
        "model": model,
        "target": chip.name,
        "layout": {"nodes": layout.nodes, "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "world": layout.world,
                   "lnc": chip.lnc, "cores_per_node": chip.cores_per_instance},
        "request": {"mode": request.mode, "dtype": request.dtype, "zero1": request.zero1,
                    "recompute": request.recompute if request.mode == "train" else "none",
                    **({"micro_batch": request.micro_batch, "global_batch": result["global_batch"], "seq": request.seq}
                       if request.mode == "train" else
                       {"batch": request.batch, "compiled_batch": request.decoding().batch,
                        **({"compiled_seq": request.compiled_seq} if request.compiled_seq else {}),
                        "input_len": request.input_len, "output_len": request.output_len,
                        "weights": request.weights or request.dtype})},
        **{k: v for k, v in result.items() if k != "global_batch"},
        "hbm_capacity_per_core_bytes": capacity,
        "fits": memory["total"] <= capacity,
        "ops": {"cpu_fallbacks": fallbacks, "computed_in_32bit": narrowed},
        "stack": stack_priced(chip), "assumptions": assumption_lines(),
    }
    answer["trust"] = trust.assess(answer)
    return answer


def stack_priced(chip: Chip) -> dict:
    """The software stack the estimate prices and what it reaches of the target (costmodel/stacks.py)."""
    return {"name": chip.stack, "description": stacks.STACKS[chip.stack].description,
            "tuned": stacks.STACKS[chip.stack].tuned, "efficiencies": vars(chip.efficiencies)}


def assumption_lines() -> list[str]:
    return ["A GEMM reaches the fraction of TensorE's tile rate that the NKI cycle model measures for a well-blocked "
            "kernel of its shape (localneuron/costmodel/gemm_efficiency.py)", *assumptions.RULES]
