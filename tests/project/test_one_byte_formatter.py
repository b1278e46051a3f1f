"""One byte formatter: a size in bytes becomes text only through localneuron/runtime/units.py's bytes_text, which
is the C++ allocator's format_bytes (csrc/runtime/allocator.h: its out-of-memory message is made without Python),
so a size reads the same in every report, command and error. No other C++ source names a byte unit, and, read from
the sources, no other module under localneuron/

- divides by a binary byte unit (a constant that is a power of 1024: 1024, 1 << 20, 2**30, 1024**3, 1024 * 1024,
  or costmodel/hardware.py's KIB/GIB names), with / or //, in an expression or an augmented assignment: that
  is how a size is scaled for printing, and the package has no other use for it;
- formats a division by a power of 1000 (1e9, 10**6, ...) followed in the f-string by a byte unit (GB, MB,
  kB, GiB...): a decimal size made by hand.

Multiplying by a unit (a size from its parts: 16 * KIB, 1 << 20 bytes) is not formatting and is allowed, and a
power of 1000 with no byte unit after it (seconds, parameter counts) is not a size. ALLOWED lists the
exceptions with their reasons; each failure names file:line."""
import ast
import re

from import_graph import PACKAGE

CSRC = PACKAGE.parent / "csrc"
CPP_FORMATTER = "runtime/allocator.cpp"
CPP_BYTE_UNIT = re.compile(r'"[KMGTPE]iB"')

FORMATTER = "runtime/units.py"
UNIT_NAMES = {"KIB", "MIB", "GIB", "TIB"}
BYTE_UNIT_TEXT = re.compile(r"\s*[kKMGTPE]i?B\b")
# (file, a text of the line) -> why the line may scale bytes itself
ALLOWED = {
    ("device/devices.py", "total_memory={self.total_memory // (1 << 20)}MB"):
        "the repr of torch.neuron.get_device_properties() reads like torch.cuda's _CudaDeviceProperties "
        "(total_memory=...MB, whole mebibytes), which code ported from CUDA may parse",
}


def _constant(node):
    """The value of an integer or float expression made of literals alone, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.LShift, ast.Pow, ast.Mult)):
        left, right = _constant(node.left), _constant(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and right > 64):
            return None
        if isinstance(node.op, ast.LShift):
            return left << right if isinstance(left, int) and isinstance(right, int) else None
        return left ** right if isinstance(node.op, ast.Pow) else left * right
    return None


def _power_of(value, base: int) -> bool:
    if value is None or value < base or value != int(value):
        return False
    value = int(value)
    while value % base == 0:
        value //= base
    return value == 1


def _binary_unit(node) -> bool:
    return (isinstance(node, ast.Name) and node.id in UNIT_NAMES) or _power_of(_constant(node), 1024)


def _decimal_division(node) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))
            and _power_of(_constant(node.right), 1000))


def byte_formatting(source: str, filename: str) -> list[str]:
    """The places in `source` that scale bytes to a unit themselves, one `filename:line: why` each."""
    lines = source.splitlines()
    found = []

    def flag(node, why):
        line = lines[node.lineno - 1]
        if not any(file == filename and text in line for file, text in ALLOWED):
            found.append(f"{filename}:{node.lineno}: {why}: {line.strip()}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)) and _binary_unit(node.right):
            flag(node, "divides by a binary byte unit")
        elif (isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Div, ast.FloorDiv))
              and _binary_unit(node.value)):
            flag(node, "divides by a binary byte unit")
        elif isinstance(node, ast.JoinedStr):
            for value, after in zip(node.values, node.values[1:]):
                if (isinstance(value, ast.FormattedValue) and _decimal_division(value.value)
                        and isinstance(after, ast.Constant) and BYTE_UNIT_TEXT.match(after.value)):
                    flag(value, "formats a decimal byte size")
    return found


def test_no_module_but_units_formats_bytes_itself():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        filename = path.relative_to(PACKAGE).as_posix()
        if filename != FORMATTER:
            found += byte_formatting(path.read_text(), filename)
    assert not found, "bytes made into text outside runtime/units.py's bytes_text:\n" + "\n".join(found)


def test_every_allowed_exception_is_still_there():
    for file, text in ALLOWED:
        assert text in (PACKAGE / file).read_text(), f"{file} no longer holds {text!r}: remove it from ALLOWED"


def test_the_check_finds_bytes_formatted_by_hand_and_leaves_other_arithmetic():
    by_hand = '''
a = f"{n / (1 << 30):.1f} GiB"
b = f"{n / 2**20:.1f} MiB"
c = n / 1024 ** 3
d = n // (1024 * 1024)
n /= 1024
e = f"{n / 1e9:.1f} GB"
f = f"{n / GIB:.2f}"
'''
    assert sorted(int(line.split(":")[1]) for line in byte_formatting(by_hand, "x.py")) == [2, 3, 4, 5, 6, 7, 8]
    other = '''
size = 16 * KIB + (1 << 20)
ns = int(seconds * 1e9)
seconds = cycles / (clock_ghz * 1e9)
text = f"{n / 1e9:.1f}B parameters"
ms = f"{s * 1e3:.2f} ms"
chunk = os.read(fd, 1 << 20)
half = n / 2
'''
    assert byte_formatting(other, "x.py") == []


def test_no_cpp_source_but_the_allocator_names_a_byte_unit():
    found = [f"{path.relative_to(CSRC)}:{number}: {line.strip()}"
             for path in sorted(CSRC.rglob("*")) if path.suffix in (".cpp", ".h", ".cc")
             and path.relative_to(CSRC).as_posix() != CPP_FORMATTER
             for number, line in enumerate(path.read_text().splitlines(), 1) if CPP_BYTE_UNIT.search(line)]
    assert not found, "a byte unit outside csrc/runtime/allocator.cpp's format_bytes:\n" + "\n".join(found)


def test_python_formats_bytes_as_the_out_of_memory_message_does():
    # tests/device/test_memory_accounting.py checks the message itself ("512 bytes is allocated by tensors")
    from localneuron import _C
    from localneuron.runtime.units import bytes_text

    sizes = (0, 512, 1023, 1536, 24 * 2**30, 3 * 2**50)
    assert [bytes_text(n) for n in sizes] == ["0 bytes", "512 bytes", "1023 bytes", "1.50 KiB", "24.00 GiB",
                                              "3.00 PiB"]
    assert [bytes_text(n) for n in sizes] == [_C.format_bytes(n) for n in sizes]
