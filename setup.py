"""Builds the C++ core (localneuron._C) against the installed torch."""
import glob
import os

# An earlier, broken install must not stop the build: torch would autoload it on import.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths  # noqa: E402

os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 2))

setup(
    ext_modules=[
        CppExtension(
            name="localneuron._C",
            sources=sorted(glob.glob("csrc/**/*.cpp", recursive=True)),
            # Headers are included by their folder ("queue/queue.h"). Kineto's headers (the device's torch.profiler
            # plugin, csrc/profiler/trace_plugin.cpp) include each other by bare name.
            include_dirs=[os.path.abspath("csrc"), os.path.join(include_paths()[0], "kineto")],
            extra_compile_args=["-O2", "-g0", "-std=c++17"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
