"""``gelus audit TARGET``: :func:`gelus.audit` from the command line.

TARGET is a Hugging Face transformers config (a ``config.json``, or the folder holding one: the
model is built from it with random weights from a fixed seed, or, from a folder that also holds
the checkpoint's weights, loaded with ``from_pretrained(local_files_only=True)``; example inputs
are made up from the config) or ``package.module:factory``, a function of no arguments returning
``(model, example_inputs)``. A target, file or form that does not work is one line naming it and
the way out, exit status 2.
"""

import argparse
import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_WAY_OUT = "give a transformers config.json, its folder, or package.module:factory"


class _TargetError(Exception):
    """A TARGET (or option) that does not give a model: the one line to print."""


def register(subparsers) -> None:
    """Add ``gelus audit``."""
    parser = subparsers.add_parser(
        "audit",
        help="which GELU form each activation of a model computes, and what a swap changes",
        description="List every activation site of a model (modules and functional F.gelu / "
        "F.silu calls) with its form (exact, tanh, sigmoid 1.702, SiLU, clipped, ...), and "
        "measure how much the model's outputs change when a site, or every site, is served in "
        "another GELU form.",
        epilog="TARGET: a transformers config.json or its folder (random weights unless the "
        "folder holds the checkpoint's), or package.module:factory returning "
        "(model, example_inputs). Changes are max/rms of |change| / RMS(output).",
    )
    parser.add_argument("target", metavar="TARGET", help="config.json, its folder, or mod:factory")
    parser.add_argument(
        "--trained-with",
        metavar="FORM",
        default=None,
        help="the form the checkpoint was trained with (exact, tanh, sigmoid; or gelu_new, ...)",
    )
    parser.add_argument("--json", metavar="FILE", default=None, help="also write the report here")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random weights and inputs (default 0)"
    )
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from gelus._audit import ForwardError, audit, parse_form

    debug = getattr(args, "debug", False) or os.environ.get("GELUS_DEBUG", "") not in ("", "0")
    try:
        trained = None if args.trained_with is None else _form(parse_form, args.trained_with)
        model, inputs, kwargs, header = _target(args.target, args.seed)
        report = audit(model, *inputs, trained_with=trained, **kwargs)
    except _TargetError as error:
        if debug:
            raise
        print(f"gelus audit: error: {error}", file=sys.stderr)
        return 2
    except ForwardError as error:
        if debug:
            raise
        print(
            f"gelus audit: error: the model's forward fails on the example inputs ({_first(error)})"
            "; give package.module:factory returning (model, example_inputs) that it accepts",
            file=sys.stderr,
        )
        return 2
    print("\n".join([*header, str(report)]))
    if args.json is not None:
        try:
            Path(args.json).write_text(json.dumps(report.to_dict(), indent=1) + "\n")
        except OSError as error:
            reason = error.strerror or type(error).__name__
            print(
                f"gelus audit: error: cannot write {args.json} ({reason}); give --json a "
                "file in a folder you can write to",
                file=sys.stderr,
            )
            return 2
    return 0


def _first(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]


def _form(parse_form, name: str) -> str:
    try:
        return parse_form(name)
    except ValueError as error:
        raise _TargetError(f"--trained-with {error}") from error


def _target(target: str, seed: int) -> tuple[Any, tuple, dict, list[str]]:
    """(model, args, kwargs, header lines) for TARGET."""
    if _FACTORY.match(target) and not os.path.exists(target):
        return _from_factory(target)
    path = Path(target)
    if not path.exists():
        raise _TargetError(f"{target}: no such file or folder; {_WAY_OUT}")
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise _TargetError(f"{target} holds no config.json; {_WAY_OUT}")
    return _from_config(path, file, seed)


def _from_factory(target: str) -> tuple[Any, tuple, dict, list[str]]:
    import torch
    from torch import nn

    module_name, _, attribute = target.partition(":")
    sys.path.insert(0, os.getcwd())  # a factory in the folder the command runs in, as `python -m`
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise _TargetError(
            f"cannot import {module_name} ({type(error).__name__}: {_first(error)}); run from the "
            "folder that holds it, or install it"
        ) from error
    finally:
        sys.path.remove(os.getcwd())
    factory: Any = module
    for part in attribute.split("."):
        factory = getattr(factory, part, None)
    if not callable(factory):
        raise _TargetError(f"{module_name} has no function {attribute}; {_WAY_OUT}")
    try:
        result = factory()
    except Exception as error:
        raise _TargetError(f"{target}() raised {type(error).__name__}: {_first(error)}") from error
    if not (isinstance(result, tuple | list) and len(result) == 2):
        raise _TargetError(f"{target}() must return (model, example_inputs), not {result!r:.80}")
    model, inputs = result
    if not isinstance(model, nn.Module):
        raise _TargetError(
            f"{target}() returned {type(model).__name__} as the model, not an nn.Module"
        )
    if isinstance(inputs, dict):
        return model, (), inputs, [f"gelus audit: {type(model).__name__} from {target}"]
    args = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    return model, args, {}, [f"gelus audit: {type(model).__name__} from {target}"]


def _from_config(path: Path, file: Path, seed: int) -> tuple[Any, tuple, dict, list[str]]:
    """The model of a transformers config, random (seeded) or with the folder's weights."""
    import torch

    try:
        import transformers
    except Exception as error:
        raise _TargetError(
            f"a config TARGET needs transformers, which does not import here "
            f"({type(error).__name__}: {_first(error)}): pip install transformers"
        ) from error
    try:
        config = transformers.AutoConfig.from_pretrained(str(file), local_files_only=True)
    except Exception as error:
        raise _TargetError(f"{file} is not a transformers config ({_first(error)})") from error
    arch = (getattr(config, "architectures", None) or [None])[0]
    cls = getattr(transformers, arch, None) if arch else None
    cls = cls or transformers.AutoModel
    weights = path.is_dir() and any((path / name).is_file() for name in _WEIGHTS)
    try:
        if weights:
            model = cls.from_pretrained(str(path), local_files_only=True)
            source = [f"gelus audit: {type(model).__name__} from {path}", "weights: the folder's"]
        else:
            torch.manual_seed(seed)
            model = cls.from_config(config) if cls is transformers.AutoModel else cls(config)
            beside = file.parent != path and any((file.parent / n).is_file() for n in _WEIGHTS)
            hint = (
                "give the folder to load the weights beside it"
                if beside
                else ("give a checkpoint folder with weights to load them")
            )
            source = [
                f"gelus audit: {type(model).__name__} from {file}",
                f"weights: RANDOM (seed {seed}): {hint}",
            ]
    except ImportError as error:  # transformers imports a model's code on first use
        raise _TargetError(
            f"transformers cannot import the code of {file}'s model here "
            f"({type(error).__name__}: {_first(error)}); often a torchvision built for another "
            "torch: repair or uninstall it (docs/INTEGRATIONS.md, The environment)"
        ) from error
    except Exception as error:
        raise _TargetError(
            f"cannot build the model of {file} ({type(error).__name__}: {_first(error)}); "
            "give package.module:factory returning (model, example_inputs)"
        ) from error
    kwargs = _inputs(model, config, seed)
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in kwargs.items())
    return model, (), kwargs, [*source, f"inputs: {shapes} (random, seed {seed})"]


def _inputs(model: Any, config: Any, seed: int) -> dict[str, Any]:
    """Example inputs of a transformers model made up from its config: token ids for a text model,
    pixels for a vision model, mel features or a waveform for a speech model; decoder ids for an
    encoder-decoder."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None) or 100
    positions = getattr(text, "max_position_embeddings", None) or getattr(text, "n_positions", 16)
    length = max(1, min(16, int(positions or 16)))

    def tokens(n: int) -> Any:
        return torch.randint(0, min(int(vocab), 1000), (2, n), generator=generator)

    name = getattr(model, "main_input_name", "input_ids")
    if name == "input_ids":
        kwargs = {"input_ids": tokens(length)}
    elif name == "pixel_values":
        vision = getattr(config, "vision_config", None) or config
        size = getattr(vision, "image_size", 32)
        height, width = (size, size) if isinstance(size, int) else tuple(size)[-2:]
        channels = getattr(vision, "num_channels", 3)
        kwargs = {"pixel_values": torch.randn(2, channels, height, width, generator=generator)}
    elif name == "input_features" and hasattr(config, "num_mel_bins"):
        frames = 2 * getattr(config, "max_source_positions", 8)  # Whisper's stem halves it
        kwargs = {
            "input_features": torch.randn(2, config.num_mel_bins, frames, generator=generator)
        }
    elif name == "input_values":
        kwargs = {"input_values": torch.randn(2, 16000, generator=generator)}
    else:
        raise _TargetError(
            f"cannot make up the inputs of {type(model).__name__} (its main input is {name}); "
            "give package.module:factory returning (model, example_inputs)"
        )
    if getattr(config, "is_encoder_decoder", False):
        kwargs["decoder_input_ids"] = tokens(min(length, 8))
    return kwargs
