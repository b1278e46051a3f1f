"""The simulated NeuronCore: targets, visible cores, executables and their accounting."""
