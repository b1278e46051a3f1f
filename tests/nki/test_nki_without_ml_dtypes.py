"""NKI without the `nki` extra: the core depends on torch and numpy only, so kernels on numpy's own types
(float32, float16, integers) run without ml_dtypes, narrow tiles inside a kernel too (their values live in
float32 on the host), and only host arrays of the narrow float types (bfloat16, fp8, fp4) need ml_dtypes, with
an error that names the extra to install. Each case runs in a fresh interpreter where ml_dtypes cannot import.
"""
import subprocess
import sys
import textwrap

import pytest

HIDE_ML_DTYPES = """
import sys
sys.modules["ml_dtypes"] = None     # import ml_dtypes now raises ModuleNotFoundError
import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa
from localneuron.nki.dtypes import static_cast
"""


def run_without_ml_dtypes(body):
    code = HIDE_ML_DTYPES + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def test_float32_float16_and_integer_kernels_run_without_ml_dtypes():
    code, out = run_without_ml_dtypes("""
        @nki.jit
        def add(a, b):
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.add(nl.load(a), nl.load(b)))
            return out

        for dtype in (np.float32, np.float16, np.int32, np.uint8):
            a = np.arange(12, dtype=dtype).reshape(3, 4)
            got = add(a, a)
            assert got.dtype == dtype and np.array_equal(got, a + a), (dtype, got)
        print("ok", nl.float32.dtype, nl.int32.dtype, nl.bool_.dtype)
    """)
    assert code == 0, out
    assert "ok float32 int32 bool" in out


def test_a_bfloat16_tile_inside_a_float32_kernel_runs_and_rounds_without_ml_dtypes():
    code, out = run_without_ml_dtypes("""
        @nki.jit
        def through_bf16(a):
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            narrow = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
            nisa.tensor_copy(dst=narrow, src=nl.load(a))
            nl.store(out, narrow)
            return out

        a = np.array([[1.0 + 2.0 ** -9, 3.0]], dtype=np.float32)
        got = through_bf16(a)
        assert got.dtype == np.float32 and got.tolist() == [[1.0, 3.0]], got
        print("ok")
    """)
    assert code == 0, out


@pytest.mark.parametrize("use", [
    "np.zeros(3, dtype=nl.bfloat16)",
    "nl.float8_e4m3.dtype",
    "static_cast(np.ones((1, 4), np.float32), nl.float8_e4m3fn_x4)",
    "through_kernel()",
])
def test_host_arrays_of_narrow_floats_name_the_nki_extra(use):
    code, out = run_without_ml_dtypes(f"""
        @nki.jit
        def to_bf16(a):
            out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
            nl.store(out, nl.load(a))
            return out

        def through_kernel():
            return to_bf16(np.ones((2, 2), np.float32))

        try:
            {use}
        except ImportError as error:
            print("ImportError:", error)
        else:
            print("no error")
    """)
    assert code == 0, out
    assert "ImportError:" in out and "pip install 'localneuron[nki]'" in out and "ml_dtypes" in out, out
