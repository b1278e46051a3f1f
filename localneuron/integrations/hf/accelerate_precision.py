"""Accelerate's fp16 mixed precision on `neuron`: `Accelerator.__init__` accepts fp16 only on a fixed list
of device types without `neuron`, so a Trainium run stops there with a ValueError raised deep inside
Trainer or Accelerator. The check is inline in the constructor (no hook to extend), so localneuron keeps
the refusal and replaces the traceback with what to do instead."""
import functools
from importlib.metadata import version

from . import notes

FP16_ADVICE = (
    "Accelerate {version} refuses mixed_precision='fp16' on the `neuron` device (its fp16 path lists CUDA, "
    "XPU, NPU, ... only), on Trainium as here. Use mixed_precision='bf16' (TrainingArguments(bf16=True)): "
    "bf16 is Trainium's native low precision and needs no loss scaling. For fp16 in your own training loop, "
    "use torch.autocast('neuron', dtype=torch.float16) with torch.amp.GradScaler('neuron')."
)


class NeuronFp16Unsupported(ValueError):
    pass


def _explained(upstream_init, accelerate_version):
    @functools.wraps(upstream_init)
    def __init__(self, *args, **kwargs):
        try:
            upstream_init(self, *args, **kwargs)
        except ValueError as error:
            if "fp16 mixed precision requires a device" not in str(error) or "'neuron'" not in str(error):
                raise
            notes.record("accelerate_fp16")
            raise NeuronFp16Unsupported(FP16_ADVICE.format(version=accelerate_version)) from None

    __init__.__localneuron_upstream__ = upstream_init
    return __init__


def patch(accelerator_module) -> None:
    """Called with `accelerate.accelerator`."""
    cls = accelerator_module.Accelerator
    if not hasattr(cls.__init__, "__localneuron_upstream__"):
        cls.__init__ = _explained(cls.__init__, version("accelerate"))
