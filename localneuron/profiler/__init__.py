"""torch.profiler for the neuron device (device timeline, runtime events) and the profile files of
torch_neuronx.profiling."""
