"""c10d backend `neuron` (contract §10): one process per NeuronCore, collectives on Gloo over the
device memory itself. Importing this package registers the backend (localneuron does it at autoload)."""
from localneuron.distributed.backend import register

register()
