"""localneuron's version: written here, at the bottom, because the compile cache's key carries it (an entry
written by another version is never reused) and the root package shows it as `localneuron.__version__`.
pyproject.toml states it again for packaging; the two are kept equal by hand."""
VERSION = "0.1.0"
