"""What the Hugging Face integration had to do for a run (shown in the portability report): each bridge
is behaviour the upstream library lacks for `neuron` and that a Trainium run would hit."""
from collections import Counter

_bridged: Counter = Counter()

# bridge -> what upstream does without localneuron (the line a porting engineer needs)
BRIDGES = {
    "accelerate_max_memory": "Accelerate's get_max_memory has no `neuron` branch: device_map='auto' would "
                             "place the whole model on the CPU; localneuron sized it from the NeuronCores' HBM",
    "safetensors_device": "safetensors refuses device 'neuron:N' ('device neuron:0 is invalid'); localneuron "
                          "read the tensors on the host and copied them to the device",
    "accelerate_fp16": "Accelerate refuses mixed_precision='fp16' on `neuron`: the run stopped with "
                       "localneuron's explanation (use bf16)",
}


def record(bridge: str) -> None:
    _bridged[bridge] += 1


def bridged() -> dict[str, int]:
    return dict(_bridged)
