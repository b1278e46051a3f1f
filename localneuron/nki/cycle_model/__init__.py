"""Cycle model: per-engine instruction streams, dependencies, published cost rules."""
from .report import KernelReport
from .timeline import Timeline

__all__ = ["KernelReport", "Timeline"]
