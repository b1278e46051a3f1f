"""The portability report's layer sections, registered by the layers themselves: a layer that adds a section
(compile, distributed, NKI, Hugging Face, vLLM, Adaptive Eager) registers its collect and render functions
here when it is first used, by importing its report module from the module whose import means the layer is in
use (the package's __init__, or the module that records what the section shows). localneuron/report/ reads
the sections from here; it names no layer's module. The registry lives in this low layer so that every
layer can register without importing the report package above it."""
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Section:
    name: str                              # the key of the section in the report's data
    collect: Callable[[], object]          # the section's data, JSON-serializable
    render: Callable[[object], list]       # its lines of the text report


_sections: dict[str, Section] = {}


def register(name: str, collect: Callable[[], object], render: Callable[[object], list]) -> None:
    """Adds (or replaces) the section `name`; registering again is harmless."""
    _sections[name] = Section(name, collect, render)


def unregister(name: str) -> None:
    _sections.pop(name, None)


def registered() -> list[Section]:
    """The sections registered so far, in the order they were first registered."""
    return list(_sections.values())
