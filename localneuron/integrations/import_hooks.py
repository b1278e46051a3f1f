"""Runs an integration right after the library it adapts finishes importing, without editing the library.

localneuron installs one `sys.meta_path` finder when the device registers. It only wraps the loader of
the modules named in `POST_IMPORT_PATCHES`; when such a module has executed, the named integration
function is imported and called with the module. Modules imported before localneuron are patched at
once; a module still executing at that moment (its import imported torch, which autoloads localneuron) is
patched on the first attribute read after its import finished. A patch that fails becomes one warning: the
library keeps working without the integration.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

# module whose import triggers the patch -> "integration module:function" (called with the module)
POST_IMPORT_PATCHES = {
    "safetensors": "localneuron.integrations.hf.safetensors_device:patch_package",
    "safetensors.torch": "localneuron.integrations.hf.safetensors_device:patch_torch_module",
    "accelerate.utils": "localneuron.integrations.hf.accelerate_memory:patch",
    "accelerate.accelerator": "localneuron.integrations.hf.accelerate_precision:patch",
    "torch.nn.attention.flex_attention": "localneuron.integrations.torch.flex_attention:patch",
}

_patched: set[str] = set()


def _apply(name: str, module) -> None:
    if name in _patched:
        return
    _patched.add(name)
    target, function = POST_IMPORT_PATCHES[name].split(":")
    try:
        getattr(importlib.import_module(target), function)(module)
    except Exception as error:  # noqa: BLE001 - an integration must never break the library it adapts
        warnings.warn(f"localneuron: the integration for {name} failed ({type(error).__name__}: {error}); "
                      f"{name} runs without it.", RuntimeWarning, stacklevel=2)


class _PatchedOnFirstRead(types.ModuleType):
    """The class a half-imported module wears until its import has finished: reads made by its own code go
    to its globals, not through here, so the first read through here after the import is a user's or the
    importing package's (`from .accelerator import Accelerator`), and it sees the patched module."""
    __slots__ = ()

    def __getattribute__(self, attribute):
        spec = types.ModuleType.__getattribute__(self, "__spec__")
        if not getattr(spec, "_initializing", False):
            self.__class__ = types.ModuleType
            _apply(types.ModuleType.__getattribute__(self, "__name__"), self)
        return types.ModuleType.__getattribute__(self, attribute)


def _still_importing(module) -> bool:
    return getattr(getattr(module, "__spec__", None), "_initializing", False)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, name: str, loader):
        self._name = name
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply(self._name, module)

    def __getattr__(self, attribute):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, attribute)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in POST_IMPORT_PATCHES or name in _patched:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(name, spec.loader)
                return spec
        return None


def install() -> None:
    if not any(isinstance(finder, _PostImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())
    for name in POST_IMPORT_PATCHES:
        module = sys.modules.get(name)
        if module is None or name in _patched:
            continue
        if _still_importing(module) and type(module) is types.ModuleType:
            module.__class__ = _PatchedOnFirstRead
        else:
            _apply(name, module)
