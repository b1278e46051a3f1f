"""c10d backend `neuron` (docs/support-matrix.md#distributed): one process per NeuronCore, collectives on Gloo over the
device memory itself. Importing this package registers the backend (localneuron does it at autoload).
See README.md here for the design and its limits."""
from localneuron.distributed import report  # noqa: F401  (the portability report's distributed section)
from localneuron.distributed.backend import register
from localneuron.distributed.process_group import ProcessGroupNeuron  # noqa: F401

register()
