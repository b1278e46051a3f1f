"""NKI has no 64-bit types: float64/int64/uint64 data (numpy, torch tensors, nl.ndarray dtypes) is computed
in the 32-bit type with one warning per type, the device's own 64-bit policy."""
import os

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from fresh_python import run_python


@nki.jit
def double(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    total = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=x, data2=x, op=nl.add)
    nl.store(out, total)
    return out


@pytest.mark.parametrize("wide,narrow", [(np.float64, np.float32), (np.int64, np.int32), (np.uint64, np.uint32)])
def test_64bit_numpy_inputs_compute_in_32bit_like_the_32bit_inputs(quiet, wide, narrow):
    values = np.arange(128 * 4).reshape(128, 4) * 3 + 1
    got = double(values.astype(wide))
    assert got.dtype == narrow
    np.testing.assert_array_equal(got, double(values.astype(narrow)))


def test_float64_precision_and_int64_range_are_those_of_the_32bit_type(quiet):
    np.testing.assert_array_equal(double(np.full((1, 2), 0.1)), np.full((1, 2), np.float32(0.1) * 2))
    big = np.array([[2**31 - 1, 2**40 + 3]], dtype=np.int64)
    np.testing.assert_array_equal(double(big), double(big.astype(np.int32)))  # 2**40 + 3 wraps to 3 first


def test_torch_float64_tensors_and_64bit_ndarray_dtypes_narrow_too(quiet):
    t = torch.linspace(0, 1, 8, dtype=torch.float64).reshape(2, 4)
    for device in ("cpu", "neuron"):
        got = double(t.to(device))
        assert got.dtype == torch.float32 and got.device.type == device
        torch.testing.assert_close(got.cpu(), (t.float() * 2))

    @nki.jit
    def wide_scratch(a):
        out = nl.ndarray(a.shape, np.float64, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out
    assert wide_scratch(np.ones((2, 2), dtype=np.float32)).dtype == np.float32


def test_each_64bit_type_warns_once_per_process_naming_the_32bit_type():
    code = ("import warnings\nwarnings.simplefilter('always')\nimport numpy as np, torch\n"
            "from test_nki_64bit import double\n"
            "for _ in range(3):\n"
            "    double(np.ones((2, 2)))\n"
            "    double(np.ones((2, 2), dtype=np.int64))\n"
            "double(torch.ones(2, 2, dtype=torch.float64))\n")
    tests_on_path = {"PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "..", "support"),
                                                 os.environ.get("PYTHONPATH", "")])}
    r = run_python(code, env=tests_on_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("float64 is not an NKI data type: NKI kernels compute it as float32") == 1, r.stderr
    assert r.stderr.count("int64 is not an NKI data type: NKI kernels compute it as int32") == 1, r.stderr
    silenced = run_python(code, env={**tests_on_path, "TORCH_NEURONX_LOG_LEVEL": "0"})
    assert silenced.returncode == 0 and "not an NKI data type" not in silenced.stderr
