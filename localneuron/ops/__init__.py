"""Eager op policy: which ops run on the NeuronCore, which fall back to the host, and how."""
