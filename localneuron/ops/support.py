"""Looks up an op's support rule (op_records.py) for the dtypes it is called with."""
from localneuron.ops.op_records import CPU_FALLBACK, DTYPE_EXCEPTIONS, NATIVE, OP_SUPPORT


def rule_for(op_name: str, dtypes: set[str]) -> tuple[str, bool]:
    """(rule, listed): the table's rule, or NATIVE with listed=False for ops the table does not name.

    In-place variants (add_) fall back to the entry of their functional op (add) when unlisted.
    """
    rule = OP_SUPPORT.get(op_name)
    if rule is None and op_name.endswith("_"):
        rule = OP_SUPPORT.get(op_name[:-1])
    if rule is None:
        return NATIVE, False
    if rule == NATIVE and dtypes & set(DTYPE_EXCEPTIONS.get(op_name, ())):
        return CPU_FALLBACK, True
    return rule, True
