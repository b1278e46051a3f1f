"""The PyTorch device `neuron`: registration, the torch.neuron module, memory, streams, RNG."""
