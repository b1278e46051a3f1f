"""Runs an estimate from a model description and a layout, and renders the answer."""
from localneuron.costmodel.hardware import Chip
from localneuron.estimate import plan
from localneuron.estimate.architecture import Architecture
from localneuron.estimate.layout import Layout
from localneuron.estimate.trace import fake_device

MODES = ("train", "prefill", "decode")


def _check_mode(request: plan.Request) -> None:
    if request.mode not in MODES:
        raise plan.RequestError(f"--mode must be one of {MODES}, got {request.mode!r}")


def estimate(arch: Architecture, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    """With localneuron's own Megatron-style builder (Llama and GPT families)."""
    _check_mode(request)
    with fake_device():
        result = plan.train(arch, layout, request) if request.mode == "train" else plan.inference(arch, layout, request)
    model = {"model_type": arch.model_type, "built_with": "localneuron's Megatron-style builder",
             "parameters": arch.parameters, "layers": arch.layers, "hidden_size": arch.hidden, "heads": arch.heads,
             "kv_heads": arch.kv_heads, "vocab_size": arch.vocab}
    return _answer(model, result, chip, layout, request)


def estimate_hf(config: dict, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    """With the model transformers builds from the config (any causal LM it knows)."""
    from localneuron.estimate import hf

    _check_mode(request)
    with fake_device():
        model, result = hf.estimate(config, layout, request)
    return _answer(model, result, chip, layout, request)


def _answer(model: dict, result: dict, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    traced = result.pop("traced")
    fallbacks, narrowed = {}, {}
    for t in traced:
        for name, calls in t.fallback_ops.items():
            fallbacks[name] = fallbacks.get(name, 0) + calls
        for name, calls in t.computed_in_32bit.items():
            narrowed[name] = narrowed.get(name, 0) + calls
    capacity = chip.hbm_bytes_per_core
    memory = result["hbm_per_core_bytes"]
    return {
        "model": model,
        "target": chip.name,
        "layout": {"nodes": layout.nodes, "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "world": layout.world,
                   "cores_per_node": chip.cores_per_instance},
        "request": {"mode": request.mode, "dtype": request.dtype, "zero1": request.zero1,
                    "recompute": request.recompute if request.mode == "train" else "none",
                    **({"micro_batch": request.micro_batch, "global_batch": result["global_batch"], "seq": request.seq}
                       if request.mode == "train" else
                       {"batch": request.batch, "input_len": request.input_len, "output_len": request.output_len})},
        **{k: v for k, v in result.items() if k != "global_batch"},
        "hbm_capacity_per_core_bytes": capacity,
        "fits": memory["total"] <= capacity,
        "ops": {"cpu_fallbacks": fallbacks, "computed_in_32bit": narrowed},
        "assumptions": plan.assumptions(),
    }


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 10 else f"{s:.2f} s"


def summary(e: dict) -> str:
    m, lay, req = e["model"], e["layout"], e["request"]
    lines = [f"localneuron estimate: {m['model_type']} {m['parameters'] / 1e9:.1f}B parameters on {lay['nodes']} "
             f"{e['target']} node(s) ({lay['world']} NeuronCores: tp={lay['tp']} pp={lay['pp']} dp={lay['dp']}), "
             f"{req['mode']}, {req['dtype']} (an estimate from the cost model, not a measurement)", f"  model built with {m['built_with']}"]
    if req["mode"] == "train":
        lines.append(f"  step {_ms(e['step_s'])}: {e['seq_per_s']:.2f} sequences/s, {e['tokens_per_s']:,.0f} tokens/s, "
                     f"MFU {100 * e['mfu']:.1f}% (micro-batch {req['micro_batch']}, global batch {req['global_batch']}, "
                     f"{e['micro_batches_per_step']} micro-batches per step, seq {req['seq']})")
        total = e["step_s"]
    else:
        lines.append(f"  time to first token {_ms(e['ttft_s'])} (batch {req['batch']}, input {req['input_len']})")
        total = e["ttft_s"]
        if req["mode"] == "decode":
            lines.append(f"  time per output token {_ms(e['tpot_s'])}: {e['tokens_per_s']:.1f} tokens/s "
                         f"(output {req['output_len']})")
            total = e["tpot_s"]
    parts = ", ".join(f"{k.replace('_', ' ')} {100 * v / total:.0f}%" for k, v in e["breakdown"].items() if v > 0)
    lines.append(f"  where the time goes: {parts}")
    saves = e["compile_saves"]
    lines.append(f"  estimated device time of the layers' forward: eager {_ms(saves['eager_forward_s'])}, "
                 f"as compiled graphs {_ms(saves['compiled_forward_s'])}")
    hbm = e["hbm_per_core_bytes"]
    parts = ", ".join(f"{k.replace('_', ' ')} {_gib(v)}" for k, v in hbm.items() if k != "total" and v)
    verdict = "fits" if e["fits"] else "DOES NOT FIT"
    lines.append(f"  HBM per NeuronCore: {_gib(hbm['total'])} of {_gib(e['hbm_capacity_per_core_bytes'])} -> {verdict} "
                 f"({parts})")
    ops = e["ops"]
    if ops["cpu_fallbacks"]:
        lines.append("  CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in ops["cpu_fallbacks"].items()))
    if ops["computed_in_32bit"]:
        lines.append("  64-bit ops computed in 32 bits: " + ", ".join(ops["computed_in_32bit"]))
    return "\n".join(lines)
