"""Compilation artifacts under TORCH_NEURONX_DEBUG_DIR, in TorchNeuron's layout
(docs/support-matrix.md#torchcompile), kept only with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1:

    fx_graphs/proc_{rank}/{model}_{timestamp}.fx.txt       the ATen graph as compiled (host devices)
    raw/proc_{rank}/{model}_{timestamp}.host.py            the lowered program: Inductor's wrapper with its C++ kernels
    neff/proc_{rank}/{model}_{timestamp}.neff              the executable: the compile-cache entry's payload (kernels included)

TorchNeuron's stablehlo/ directory has no counterpart: the host code generator has no StableHLO stage.
The directory must be this user's own, like a private compile cache (its default is per user), and
files are never written through a symlink; when it cannot be used, one warning and the compile goes on.
"""
import datetime
import os
import re

from localneuron.ops import tracking
from localneuron.runtime import checked_files
from localneuron.runtime.checked_files import Untrusted
from localneuron.runtime.environment import read

# kind -> (directory, suffix)
LAYOUT = {
    "fx": ("fx_graphs", ".fx.txt"),
    "lowered": ("raw", ".host.py"),
    "executable": ("neff", ".neff"),
}


def rank() -> int:
    return read("RANK") or 0


def preserve(debug_dir: str, model_name: str, graph_code: str, lowered: str, executable: bytes) -> None:
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    model_name = re.sub(r"[/\0]", "_", model_name)  # a file name, never a path out of the directory
    contents = {"fx": graph_code.encode(), "lowered": lowered.encode(), "executable": executable}
    try:
        root = checked_files.open_root(debug_dir, private=True)
        try:
            for kind, (directory, suffix) in LAYOUT.items():
                kind_fd = checked_files.open_subdir(root, directory, private=True, create=True)
                try:
                    folder = checked_files.open_subdir(kind_fd, f"proc_{rank()}", private=True, create=True)
                finally:
                    os.close(kind_fd)
                try:
                    checked_files.write_atomic(folder, f"{model_name}_{stamp}{suffix}", contents[kind])
                finally:
                    os.close(folder)
        finally:
            os.close(root)
    except (OSError, Untrusted) as error:
        tracking.warn_once(f"debug-dir:{debug_dir}", f"Compilation artifacts not kept in {debug_dir}: {error}. "
                           "Set TORCH_NEURONX_DEBUG_DIR to a directory of your own.")
