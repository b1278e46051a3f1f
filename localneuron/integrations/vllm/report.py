"""The vLLM section of the portability report, and the report the serving process writes at shutdown."""
import sys

from localneuron.integrations.vllm import stats
from localneuron.runtime import report_sections
from localneuron.runtime.checked_files import OutputFile
from localneuron.runtime.environment import read
from localneuron.runtime.units import bytes_text

_output: OutputFile | None = None  # LOCALNEURON_VLLM_REPORT, opened when the worker starts


def collect() -> dict:
    counters = stats.snapshot()
    return {**counters, "hbm": dict(stats.hbm)}


def per_token_seconds(report: dict) -> float | None:
    """Estimated device time per generated token: every eager op plus the paged-attention kernels."""
    section = report["vllm"]
    if not section["tokens"]:
        return None
    total = (report["estimated_device_seconds"]["total"] + section["attention_seconds"]
             + section["kv_cache_write_seconds"])
    return total / section["tokens"]


def render(data: dict) -> list[str]:
    lines = [f"vLLM engine on neuron: {data['steps']} model steps, {data['tokens']} tokens sampled; paged attention "
             f"{data['attention_calls']} kernel calls (est. {data['attention_seconds'] * 1e3:.2f} ms), "
             f"KV-cache writes {data['kv_cache_writes']} (est. {data['kv_cache_write_seconds'] * 1e3:.2f} ms)"]
    hbm = data["hbm"]
    if hbm:
        lines.append(f"    HBM of {hbm['device']}: weights {bytes_text(hbm['weights_bytes'])}, KV cache "
                     f"{bytes_text(hbm['kv_cache_bytes'])} ({hbm['kv_cache_blocks']} blocks), largest forward pass "
                     f"{bytes_text(hbm['forward_peak_bytes'])}, of {bytes_text(hbm['capacity_bytes'])}")
    return lines

# the section is in the report once stats.py is imported (it counts what the section shows): every module
# that imports stats imports this one too, as stats itself cannot (this module reads it)
report_sections.register("vllm", collect, render)


def open_output() -> None:
    """Checks and opens LOCALNEURON_VLLM_REPORT's directory now; OutputError names a path that cannot be used."""
    global _output
    path = read("LOCALNEURON_VLLM_REPORT")
    if path and _output is None:
        _output = OutputFile(path, "the vLLM report (LOCALNEURON_VLLM_REPORT)")


def write_at_shutdown() -> None:
    """The serving process's portability report: text on stderr, JSON at LOCALNEURON_VLLM_REPORT if set."""
    from localneuron.report import portability

    data = portability.collect()
    seconds = per_token_seconds(data)
    data["vllm"]["estimated_device_seconds_per_token"] = seconds
    text = portability.render(data)
    if seconds is not None:
        text += f"\nEstimated device time per sampled token (cost model): {seconds * 1e3:.3f} ms\n"
    print(text, file=sys.stderr, flush=True)
    if _output is not None:
        _output.write(portability.to_json(data))
