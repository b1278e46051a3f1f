"""`localneuron info`: the simulated target, devices, versions, cache locations and every environment
variable localneuron reads (status 1 when one is invalid); with --ops, the op records matching a pattern.
cli/main.py parses the arguments and calls info() or ops()."""
import fnmatch
import sys


def ops(pattern: str) -> int:
    """The op records whose names match PATTERN (a glob; a plain word matches anywhere in the name)."""
    from localneuron.ops.op_records import OPS, describe

    glob = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
    matches = [op for op in sorted(OPS) if fnmatch.fnmatchcase(op, glob)]
    for op in matches:
        print(describe(op, OPS[op]))
    if not matches:
        print(f"no op record matches {pattern!r}; ops without a record run natively (unlisted)")
    return 0


def info() -> int:
    import torch

    from localneuron.runtime import environment
    from localneuron.runtime.config import ConfigurationError, device_config
    from localneuron.runtime.units import bytes_text
    from localneuron.runtime.version import VERSION

    print(f"localneuron {VERSION} (torch {torch.__version__}, python {sys.version.split()[0]})")
    status = 0
    try:
        config = device_config()
    except ConfigurationError as error:
        print(f"simulated device: not configured: {error}")
        status = 1
    else:
        t = config.target
        print(f"simulated target: {t.name} (NeuronCore {t.nc_version}), LOCALNEURON_TARGET to change")
        print(f"logical-neuroncore-config: {t.lnc} ({t.logical_cores} NeuronCores a chip; NEURON_LOGICAL_NC_CONFIG)")
        print(f"visible NeuronCores: {len(config.visible_cores)} {list(config.visible_cores)}")
        print(f"HBM per NeuronCore: {bytes_text(config.hbm_bytes_per_core)}")
        print(f"device times priced as the {t.stack} stack (localneuron estimate --stack prices others)")
        print(f"device module: torch.neuron (available: {torch.neuron.is_available()})")
    print(f"compile cache: {environment.read('TORCH_NEURONX_NEFF_CACHE_DIR')}")
    print(f"compile artifacts: {environment.read('TORCH_NEURONX_DEBUG_DIR')}")
    print("environment:")
    for name, value in environment.describe():
        print(f"  {name:<50} {value}")
        status = 1 if value.startswith("INVALID") else status
    return status
