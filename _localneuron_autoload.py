"""torch.backends entry point: makes device="neuron" usable right after `import torch`.

Kept outside the localneuron package so that nothing here can fail at import: whatever goes wrong
while loading the device becomes one warning, never a broken `import torch`.
"""


def autoload():
    try:
        import localneuron  # noqa: F401  (importing registers the device)
    except Exception as error:  # noqa: BLE001 - any failure must leave torch importable
        import warnings

        warnings.warn(
            f"localneuron could not load the neuron device ({type(error).__name__}: {error}). "
            "`import torch` continues without it. Rebuild with `pip install --no-build-isolation -e .`, "
            "or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to skip loading it.",
            RuntimeWarning,
            stacklevel=2,
        )
