"""What TorchTitan 0.3.0 needs changed to train on torch 2.13 + `neuron` (and on the host for the
reference run). Each entry is one upstream incompatibility; the recipe applies them before TorchTitan
builds anything. Keep this list short and delete an entry when its upstream cause is gone.
"""
import torch
import torch.distributed.distributed_c10d as c10d
import torch.distributed.tensor._dispatch as dtensor_dispatch
import torch.distributed.tensor._random as dtensor_random
import torch.nn.attention.flex_attention as flex

def no_dtensor_rng_tracker() -> None:
    # DTensor's OffsetBasedRNGTracker reads the generator state as Philox (seed, offset); neuron's
    # generator is mt19937 like the host's (5056-byte state), so random init would assert in
    # _random.py. Without the tracker each rank draws locally, exactly as DTensor does on the CPU.
    for module in (dtensor_dispatch, dtensor_random):
        module.is_rng_supported_mesh = lambda mesh: False


def flex_attention_in_eager_mode() -> None:
    # TorchTitan compiles flex_attention and create_block_mask with Inductor outside any model compile;
    # Inductor has no code generator for `neuron`, and its CPU kernel has no backward, so flex_attention's
    # device check refuses CPU backward. The eager implementation differentiates on both devices
    # (localneuron itself admits `neuron` to that check; the host reference run needs it for "cpu").
    import torchtitan.models.common.attention as titan_attention

    validate = flex._validate_device

    def validate_device(query, key, value):
        if query.device.type != "cpu":
            validate(query, key, value)

    flex._validate_device = validate_device
    titan_attention.FlexAttention._compiled_flex_attn = flex.flex_attention
    titan_attention._compiled_create_block_mask = flex.create_block_mask


def neuron_compiles_flex_models() -> None:
    # TorchTitan accepts only Inductor or aot_eager for a model with FlexAttention, because other backends
    # would lower flex attention to eager ATen ops. The `neuron` backend runs the flex_attention
    # higher-order ops eagerly on the device by design (localneuron/compiler/partition.py), so it is kept.
    import torchtitan.distributed.compile as titan_compile

    choose_backend = titan_compile._maybe_regional_inductor_backend

    def neuron_as_it_is(model, backend):
        return backend if backend == "neuron" else choose_backend(model, backend)

    titan_compile._maybe_regional_inductor_backend = neuron_as_it_is


def public_set_timeout() -> None:
    # TorchTitan 0.3.0 calls torch.distributed.set_timeout after step 1; torch 2.13 names it _set_pg_timeout.
    if not hasattr(torch.distributed, "set_timeout"):
        torch.distributed.set_timeout = c10d._set_pg_timeout


PATCHES = (
    no_dtensor_rng_tracker,
    flex_attention_in_eager_mode,
    neuron_compiles_flex_models,
    public_set_timeout,
)


def apply() -> None:
    for patch in PATCHES:
        patch()
