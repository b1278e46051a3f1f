"""The Hugging Face side of `--hf-config`, used when transformers is installed (the `hf` extra): the
model is built with AutoModelForCausalLM.from_config on the meta device (no weights, no network) to
confirm that the estimate's own builder describes the same model: the parameter counts must agree."""
import importlib.util

import torch

from localneuron.estimate.architecture import Architecture, ConfigError

AGREEMENT = 0.001   # the builder may differ by norms/biases transformers adds; nothing more


def available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def parameter_count(config: dict) -> tuple[int, str]:
    """(parameters of the model transformers builds from `config`, transformers version)."""
    import transformers

    fields = {k: v for k, v in config.items() if k not in ("architectures", "auto_map")}
    try:
        hf_config = transformers.AutoConfig.for_model(**fields)
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"transformers cannot read this config: {error}") from None
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters()), transformers.__version__


def check(config: dict, arch: Architecture) -> dict:
    """What transformers says about the model, after checking that it is the model the estimate builds."""
    count, version = parameter_count(config)
    if abs(count - arch.parameters) > AGREEMENT * count:
        raise ConfigError(f"transformers {version} builds {count:,} parameters from this config, the estimate's "
                          f"builder {arch.parameters:,}: some field changes the architecture in a way the estimate "
                          f"does not model; use --model-fn for this model")
    return {"built_with": f"transformers {version} (AutoModelForCausalLM.from_config on meta)", "parameters": count}
