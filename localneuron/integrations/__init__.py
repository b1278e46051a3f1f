"""Integrations with libraries that run on the `neuron` device (Hugging Face, ...) and with the parts of
PyTorch that gate features to a fixed list of device types.

Each integration lives in its own folder and is imported only when the library it adapts is imported
(see `import_hooks.py`); nothing in the core imports an integration.
"""
