"""Looks up an op's support rule (op_records.py) for the dtypes it is called with."""
from localneuron.ops.op_records import CPU_FALLBACK, DTYPE_EXCEPTIONS, NATIVE, OP_SUPPORT


# Operator libraries of other projects that register kernels for the CPU only (namespace -> library). On
# Trainium nothing implements them for the device, so TorchNeuron runs them through its CPU fallback.
HOST_ONLY_LIBRARIES = {
    "_C": "vLLM's compiled CPU kernels (vllm._C)",
}


def rule_for(op_name: str, dtypes: set[str]) -> tuple[str, bool]:
    """(rule, listed): the table's rule, or NATIVE with listed=False for ops the table does not name.

    In-place variants (add_) fall back to the entry of their functional op (add) when unlisted.
    """
    if op_name.partition("::")[0] in HOST_ONLY_LIBRARIES:
        return CPU_FALLBACK, False
    rule = OP_SUPPORT.get(op_name)
    if rule is None and op_name.endswith("_"):
        rule = OP_SUPPORT.get(op_name[:-1])
    if rule is None:
        return NATIVE, False
    if rule == NATIVE and dtypes & set(DTYPE_EXCEPTIONS.get(op_name, ())):
        return CPU_FALLBACK, True
    return rule, True
