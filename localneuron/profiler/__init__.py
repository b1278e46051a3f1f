"""torch.profiler for the neuron device (device timeline, runtime events), the profile files of
torch_neuronx.profiling, and the source attribution of the portability report."""
