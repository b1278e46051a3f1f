"""Which NeuronCore generation a kernel runs on. The generations themselves (clocks, SBUF, DMA,
features) are the cost model's table (localneuron.costmodel.hardware), so the cycle model and the
device's cost model read the same figures."""
from localneuron.costmodel.hardware import NEURON_CORES
from localneuron.runtime.environment import ConfigurationError, read

# Names accepted by NEURON_PLATFORM_TARGET_OVERRIDE.
ALIASES = {"trn1": "gen2", "inf2": "gen2", "trn2": "gen3", "trn3": "gen4",
           "gen2": "gen2", "gen3": "gen3", "gen4": "gen4"}
GENERATION_ORDER = ("gen2", "gen3", "gen4")
# The simulated device defaults to trn2 (see the project design); NKI follows it.
DEFAULT_GENERATION = "gen3"


def resolve(name):
    key = ALIASES.get(str(name).lower())
    if key is None:
        raise ValueError(f"unknown NeuronCore target {name!r}; expected one of {sorted(ALIASES)}")
    return NEURON_CORES[key]


def current():
    """The generation chosen by NEURON_PLATFORM_TARGET_OVERRIDE, else the simulated device's."""
    override = read("NEURON_PLATFORM_TARGET_OVERRIDE")
    if override is None:
        return resolve(_device_generation())
    try:
        return resolve(override)
    except ValueError as error:
        raise ConfigurationError(f"NEURON_PLATFORM_TARGET_OVERRIDE={override!r} is not valid: {error}") from None


def _device_generation():
    # The runtime layer owns the device's target; NKI must still work without it.
    try:
        from localneuron.runtime.config import selected_target
    except ImportError:
        return DEFAULT_GENERATION
    return selected_target().nc_version


def platform_of(target) -> str:
    """The instance family a generation is ("gen3" -> "trn2"), as torch_neuronx.utils.get_platform_target names it."""
    return next(name for name, gen in ALIASES.items() if gen == target.name and name.startswith("trn"))


def at_least(target, generation):
    return GENERATION_ORDER.index(target.name) >= GENERATION_ORDER.index(generation)
