"""`localneuron estimate`: how fast a model would train or serve on Trainium and whether it fits,
without allocating it. The model is traced on fake neuron tensors with the device's op routing; the cost
model (localneuron.costmodel) prices the trace; parallelism is applied analytically."""
