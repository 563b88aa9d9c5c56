"""``module:attribute`` activations: each kind builds fresh modules, hashes its code, fails clearly."""

import sys
import textwrap

import pytest
import torch
from torch import nn

from gelus.experiments.activation_spec import (
    ActivationError,
    resolve_activation,
)

ACTS_SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Softsign2(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.tensor(2.0))

        def forward(self, x):
            return self.scale * x / (1 + x.abs())

    def make_softsign2():
        return Softsign2()

    def cube(x):
        return x ** 3

    prototype = Softsign2()

    def two_args(x, y):
        return x + y

    def not_a_factory():
        return 3

    NUMBER = 7
    """
)


@pytest.fixture
def acts_module(tmp_path, monkeypatch):
    """A module file in the current directory, importable as ``user_acts_<n>``."""
    name = f"user_acts_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(ACTS_SOURCE)
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


X = torch.linspace(-3, 3, 13, dtype=torch.float64)


def test_registry_names_pass_through_unchanged():
    source = resolve_activation("gelu")
    assert (source.label, source.kind, source.code_hash) == ("gelu", "registry", "")
    assert not source.is_custom
    assert torch.equal(source.build()(X), torch.nn.functional.gelu(X))


def test_unknown_registry_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="relu"):
        resolve_activation("gleu")


@pytest.mark.parametrize(
    ("attribute", "kind"),
    [("Softsign2", "class"), ("make_softsign2", "factory"), ("prototype", "instance")],
)
def test_module_kinds_build_fresh_modules_with_their_own_parameters(acts_module, attribute, kind):
    source = resolve_activation(f"{acts_module}:{attribute}")
    assert (source.label, source.kind) == (attribute, kind)
    first, second = source.build(), source.build()
    assert first is not second
    assert first.scale is not second.scale  # never tied across layers
    expected = 2 * X / (1 + X.abs())
    assert torch.allclose(first.double()(X), expected)


def test_a_tensor_function_is_wrapped_in_a_module(acts_module):
    source = resolve_activation(f"{acts_module}:cube")
    module = source.build()
    assert source.kind == "function" and isinstance(module, nn.Module)
    assert torch.equal(module(X), X**3)


def test_label_renames_and_the_hash_is_the_defining_files(acts_module, tmp_path):
    import hashlib

    source = resolve_activation(f"mine={acts_module}:cube")
    assert source.label == "mine" and source.spec == f"{acts_module}:cube"
    path = tmp_path / f"{acts_module}.py"
    assert source.path == str(path)
    assert source.code_hash == hashlib.sha256(path.read_bytes()).hexdigest()


def test_edited_code_gets_a_new_hash(acts_module, tmp_path):
    before = resolve_activation(f"{acts_module}:cube").code_hash
    (tmp_path / f"{acts_module}.py").write_text(ACTS_SOURCE + "\n# tuned\n")
    assert resolve_activation(f"{acts_module}:cube").code_hash != before


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:act", "cannot import module 'no_such_module_xyz'"),
        ("{m}:missing", "public callables are: .*Softsign2"),
        ("{m}:NUMBER", "is of type int, not an nn.Module class"),
        ("{m}:two_args", "needs 2 positional arguments"),
        ("{m}:not_a_factory", "returned a int, not an nn.Module"),
        ("{m}:", "is not module:attribute"),
        ("my act={m}:cube", "is not a plain name"),
    ],
)
def test_bad_specs_say_what_is_wrong(acts_module, spec, message):
    with pytest.raises(ActivationError, match=message):
        resolve_activation(spec.format(m=acts_module))


def test_the_import_does_not_leave_the_cwd_on_sys_path(acts_module, tmp_path):
    before = list(sys.path)
    resolve_activation(f"{acts_module}:cube")
    assert sys.path == before
