"""Compilation artifacts under TORCH_NEURONX_DEBUG_DIR, in TorchNeuron's layout (contract §9.6), kept
only with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1:

    fx_graphs/proc_{rank}/{model}_{timestamp}.fx.txt       the ATen graph as compiled (host devices)
    raw/proc_{rank}/{model}_{timestamp}.host.py            the lowered program: Inductor's wrapper with its C++ kernels
    neff/proc_{rank}/{model}_{timestamp}.neff              the executable: the compile-cache entry (kernels included)

TorchNeuron's stablehlo/ directory has no counterpart: the host code generator has no StableHLO stage.
"""
import datetime
import os

from localneuron.compiler.cache import encode

# kind -> (directory, suffix)
LAYOUT = {
    "fx": ("fx_graphs", ".fx.txt"),
    "lowered": ("raw", ".host.py"),
    "executable": ("neff", ".neff"),
}


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def preserve(debug_dir: str, model_name: str, graph_code: str, lowered: str, executable: bytes) -> None:
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    contents = {"fx": graph_code.encode(), "lowered": lowered.encode(), "executable": encode(executable)}
    for kind, (directory, suffix) in LAYOUT.items():
        folder = os.path.join(debug_dir, directory, f"proc_{rank()}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{model_name}_{stamp}{suffix}"), "wb") as f:
            f.write(contents[kind])
