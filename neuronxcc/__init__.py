"""`neuronxcc` as Neuron 2.34 ships it to kernel authors: without the `neuronxcc.nki` namespace.

localneuron simulates the device and its NKI kernels, not the neuronx-cc compiler, so this package only
answers what code importing it from a kernel author's side learns: since Neuron 2.34 `neuronxcc.nki`
(and every module under it) is gone, and importing it fails with the documented import error and the
migration steps (see neuronxcc/nki/__init__.py).
"""
