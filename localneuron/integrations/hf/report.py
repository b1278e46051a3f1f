"""The Hugging Face section of the portability report: which gaps of the upstream libraries the run hit."""
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
