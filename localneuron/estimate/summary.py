"""The one text rendering of an estimate (run._answer's result), whatever the model source."""
from localneuron.costmodel import stacks
from localneuron.runtime.units import bytes_text, seconds_text

WHAT = {"train": "training step", "prefill": "prefill", "decode": "decode step"}


def parameters_text(n: int) -> str:
    return f"{n / 1e9:.1f}B parameters" if n >= 1e8 else f"{n:,} parameters"


def _percentages(breakdown: dict, total: float) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {100 * v / total:.0f}%" for k, v in breakdown.items() if v > 0)


def _script(e: dict) -> list[str]:
    m, lay = e["model"], e["layout"]
    groups = ", ".join(f"{name} {size}" for name, size in m["groups"].items()) or "no process groups but the world"
    lines = [f"localneuron estimate: {m['built_with']}, {parameters_text(m['parameters'])}, on {lay['nodes']} "
             f"{e['target']} node(s) at LNC={lay['lnc']} (groups: {groups}; an estimate from the cost model, not a "
             f"measurement)",
             _stack(e),
             f"  step {seconds_text(e['step_s'])} (its second optimizer step, each phase priced as compiled graphs)",
             f"  where the time of one training step goes: {_percentages(e['breakdown'], e['step_s'])}",
             "  collectives per step on the slowest rank:"]
    for kind, c in sorted(e["collectives"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"    {kind:<15} {c['calls']:>6} calls {bytes_text(c['bytes']):>12}  {seconds_text(c['seconds']):>9} "
                     f"(groups of {', '.join(map(str, c['group_sizes']))})")
    return lines


def _stack(e: dict) -> str:
    stack = e["stack"]
    reached = stack["efficiencies"]
    return (f"  stack priced: {stack['name']} ({stack['description']}): GEMMs at {100 * reached['matmul']:.0f}% of the "
            f"cycle model's rate for their shape, HBM at {100 * reached['hbm']:.0f}% of a core's reach"
            + (f", {seconds_text(reached['request_s'])} of serving before a request's first forward"
               if reached["request_s"] else "")
            + (f", {seconds_text(reached['decode_layer_s'])} of runtime waits per layer in a decode step"
               if reached["decode_layer_s"] else "") + "; --stack to change")


def render(e: dict) -> str:
    if e["model"]["model_type"] == "script":
        return "\n".join(_script(e) + _memory_and_trust(e))
    return "\n".join(_model(e) + _memory_and_trust(e))


def _memory_and_trust(e: dict) -> list[str]:
    hbm = e["hbm_per_core_bytes"]
    parts = ", ".join(f"{k.replace('_', ' ')} {bytes_text(v)}" for k, v in hbm.items() if k not in ("total", "peak") and v)
    verdict = "fits" if e["fits"] else "DOES NOT FIT"
    what = "peak of live device memory on the fullest rank" if "peak" in hbm else parts
    lines = [f"  HBM per NeuronCore: {bytes_text(hbm['total'])} of {bytes_text(e['hbm_capacity_per_core_bytes'])} -> "
             f"{verdict} ({what})"]
    if e.get("fits_compared"):
        lines.append(f"  fits, compared: {e['fits_compared']}")
    ops = e["ops"]
    if ops["cpu_fallbacks"]:
        lines.append("  CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in ops["cpu_fallbacks"].items()))
    if ops["computed_in_32bit"]:
        lines.append("  64-bit ops computed in 32 bits: " + ", ".join(ops["computed_in_32bit"]))
    trust = e["trust"]
    lines.append(f"  how far to trust it: {trust['calibration']}")
    lines += [f"  warning: {w}" for w in trust["warnings"]]
    return lines


def _model(e: dict) -> list[str]:
    m, lay, req = e["model"], e["layout"], e["request"]
    size = parameters_text(m["parameters"])
    if m.get("experts"):
        size += f" ({m['active_parameters'] / 1e9:.1f}B active; {m['experts']} experts in {m['moe_layers']} layers)"
    lines = [f"localneuron estimate: {m['model_type']} {size} on {lay['nodes']} {e['target']} node(s) "
             f"({lay['world']} NeuronCores at LNC={lay['lnc']}: tp={lay['tp']} pp={lay['pp']} dp={lay['dp']}), "
             f"{req['mode']}, {req['dtype']} (an estimate from the cost model, not a measurement)",
             f"  model: {m['built_with']}"]
    if m.get("recipe"):
        lines.append(f"  recipe assumed: {m['recipe']}")
    lines.append(_stack(e))
    if req["mode"] == "train":
        lines.append(f"  step {seconds_text(e['step_s'])}: {e['seq_per_s']:,.4g} sequences/s, {e['tokens_per_s']:,.0f} "
                     f"tokens/s, MFU {100 * e['mfu']:.1f}% (micro-batch {req['micro_batch']}, global batch "
                     f"{req['global_batch']}, {e['micro_batches_per_step']} micro-batches per step, seq {req['seq']})")
        total = e["step_s"]
    else:
        padded = req.get("compiled_seq") and stacks.compiled_tokens(e["stack"]["name"], req["input_len"],
                                                                   req["compiled_seq"]) != req["input_len"]
        lines.append(f"  time to first token {seconds_text(e['ttft_s'])} (batch {req['batch']} x {req['input_len']} "
                     f"tokens: {e['prefill_tokens_per_s']:,.0f} prompt tokens/s"
                     + (f"; encoded padded to the {req['compiled_seq']} positions the graphs were compiled for"
                        if padded else "") + ")")
        total = e["ttft_s"]
        if req["mode"] == "decode":
            lines.append(f"  time per output token {seconds_text(e['tpot_s'])}: {e['tokens_per_s']:,.1f} tokens/s "
                         f"over the batch of {req['batch']} (output {req['output_len']}, at the mean context)"
                         + (f"; every step runs the {req['compiled_batch']} slots the graph was compiled for"
                            if req.get("compiled_batch", req["batch"]) != req["batch"] else ""))
            total = e["tpot_s"]
    lines.append(f"  where the time of one {WHAT[req['mode']]} goes: {_percentages(e['breakdown'], total)}")
    saves = e.get("compile_saves")
    if saves:
        lines.append(f"  the layers' forward launched op by op would take {seconds_text(saves['eager_forward_s'])}, "
                     f"as compiled graphs {seconds_text(saves['compiled_forward_s'])}")
    return lines
