"""The Hugging Face section of the portability report: which gaps of the upstream libraries the run hit."""
from localneuron.runtime import report_sections

from .notes import BRIDGES, bridged


def collect():
    return bridged()


def render(data):
    if not data:
        return []
    lines = ["Hugging Face libraries without a `neuron` path (bridged or explained by localneuron):"]
    for bridge, times in data.items():
        lines.append(f"    {BRIDGES[bridge]} ({times}x)")
    return lines


report_sections.register("huggingface", collect, render)  # the section is in the report once this layer is used
