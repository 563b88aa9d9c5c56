"""timm and transformers, importable also where torchvision is broken.

PyPI's torchvision wheels for Linux x86-64 are built against torch's CUDA wheels (torchvision
0.28.0's ``_C.so`` links ``libc10_cuda.so``), so beside this project's CPU torch wheel its C ops
do not load and ``import torchvision`` fails ("operator torchvision::nms does not exist"). The
matching CPU build (``torchvision==0.28.0+cpu``) is only on download.pytorch.org. timm imports a
few torchvision names at import time (FrozenBatchNorm2d, transforms, feature extraction);
transformers imports torchvision where it is installed (image utilities, reached through its loss
functions). The models tested here use none of them. Where ``import torchvision`` fails, a
stand-in answers those names with classes that raise if instantiated, so a model that did use
torchvision would fail, not pass silently; torchvision's FX feature extraction, pure torch.fx
code, is the installed one (``_REAL_MODULES``). The stand-in is in sys.modules only while the
requested modules import; with a working torchvision it is not used.
"""

import enum
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import pathlib
import sys
import types

import pytest


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("torchvision is not available in this environment (test stand-in)")


# Modules of the installed (broken) torchvision that import alone, loaded from their own source
# under the stand-in: FX feature extraction is pure torch.fx code (timm's
# create_feature_extractor calls it). Its one other torchvision use, torchvision.ops (functions
# kept whole and modules kept as leaves while tracing), meets the stand-in's empty package there:
# no torchvision op is treated specially, which the models tested here do not call.
_REAL_MODULES = ("torchvision.models.feature_extraction",)


def _installed_source(fullname: str) -> str | None:
    """The installed torchvision's source file of ``fullname``, found without importing it."""
    spec = importlib.machinery.PathFinder.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = pathlib.Path(spec.submodule_search_locations[0], *fullname.split(".")[1:])
    source = path.with_suffix(".py")
    return str(source) if source.is_file() else None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self.used = []

    def find_spec(self, fullname, path, target=None):
        if fullname in _REAL_MODULES:
            source = _installed_source(fullname)
            if source is not None:
                return importlib.util.spec_from_file_location(fullname, source)
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def attribute(attr, _name=spec.name):
            if attr.startswith("__"):
                raise AttributeError(attr)
            self.used.append(f"{_name}.{attr}")
            if attr == "InterpolationMode":
                return enum.Enum(
                    "InterpolationMode",
                    "NEAREST NEAREST_EXACT BILINEAR BICUBIC BOX HAMMING LANCZOS",
                )
            return type(attr, (_Unavailable,), {})

        module.__getattr__ = attribute
        return module

    def exec_module(self, module):
        pass


def _torchvision_works() -> bool:
    try:
        import torchvision  # noqa: F401
    except Exception:  # any import error: torchvision's C ops missing for this torch build
        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[name]  # a failed import leaves partial modules behind
        return False
    return True


@functools.cache
def import_modules(*names: str) -> tuple[list[types.ModuleType], list[str]]:
    """Import ``names`` (e.g. "timm"), skipping the test if the first is not installed (it is in
    the dev extra); returns the modules and the torchvision names the stand-in answered."""
    if importlib.util.find_spec(names[0]) is None:
        pytest.skip(f"{names[0]} is in the dev extra; install it to run this test")
    if _torchvision_works():
        return [importlib.import_module(name) for name in names], []
    for name in [m for m in sys.modules if m.split(".")[0] in {n.split(".")[0] for n in names}]:
        del sys.modules[name]  # a failed import may have left partial modules behind
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    try:
        modules = [importlib.import_module(name) for name in names]
    finally:
        sys.meta_path.remove(finder)
        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[
                name
            ]  # the imported modules keep their references; nothing else sees it
    return modules, finder.used
