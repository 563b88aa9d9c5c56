"""``gelus.audit(model, *example_inputs)``: which GELU each activation site of a model computes,
and what serving it in another form does to the model's outputs.

A model trained with the tanh form and served with the exact one (or the reverse) is the most
common GELU complaint: the forms differ by up to 4.7e-4 absolutely (tanh vs exact) or 2.0e-2
(sigmoid vs exact), and what that does to a model's outputs depends on the model. The audit
answers both questions on the model itself:

- every activation site: each activation module (torch's, Hugging Face transformers', timm's,
  gelus's own; the form of a class is read from the table ``gelus.patch`` uses) and each
  functional ``F.gelu`` / ``F.silu`` call its forward makes (seen by running the example inputs
  under a :class:`torch.overrides.TorchFunctionMode`, with the call-site machinery of
  ``patch(model, functional=True)``), with its form;
- for each GELU site and each other GELU form (exact, tanh, sigmoid 1.702), the change of the
  model's outputs on the example inputs when that one site computes that form: the largest and the
  RMS change, each relative to the RMS of the output;
- the same with every GELU site swapped to each form, and, given the form the checkpoint was
  trained with, where the model as built differs from it and by how much.

The model is left as it was: a swapped module's ``forward`` is set on the instance for one
forward and removed (a ``forward`` of the instance's own is put back), the training flags are put
back after the forwards run in eval mode, and nothing else is touched.
"""

import contextlib
import math
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from gelus import modules as M
from gelus._patch import (
    _F_GELU,
    _F_SILU,
    _FAMILY_WORDS,
    _MEMBERS,
    FunctionalCall,
    FunctionalRouting,
    _caller,
    _from_gelus,
    _key,
    _module_names,
)

__all__ = ["GELU_FORMS", "AuditReport", "Change", "ForwardError", "Site", "audit", "parse_form"]

GELU_FORMS = ("exact", "tanh", "sigmoid")
"""The GELU forms a site can be swapped between: x·Φ(x), the tanh approximation, x·σ(1.702x)."""

# names a user may give for a form (the paper's, torch's, transformers' config names)
_FORM_NAMES = {
    name: form
    for form, names in {
        "exact": ("exact", "none", "erf", "gelu", "gelu_python"),
        "tanh": (
            "tanh",
            "gelu_new",
            "gelu_pytorch_tanh",
            "gelu_tanh",
            "gelu_fast",
            "gelu_accurate",
            "gelu_python_tanh",
        ),
        "sigmoid": ("sigmoid", "quick_gelu", "gelu_sigmoid"),
    }.items()
    for name in names
}
_APPROXIMATE = {"none": "exact", "tanh": "tanh", "sigmoid": "sigmoid"}  # gelus/torch -> form


def parse_form(name: str) -> str:
    """``"exact"``, ``"tanh"`` or ``"sigmoid"`` for a form's name (``"none"``, ``"gelu_new"``,
    ``"quick_gelu"``, …); a ValueError naming the accepted ones otherwise."""
    form = _FORM_NAMES.get(str(name).strip().lower())
    if form is None:
        raise ValueError(
            f"{name!r} is not a GELU form: give exact, tanh or sigmoid (or a config name such "
            f"as gelu, gelu_new, gelu_pytorch_tanh, quick_gelu)"
        )
    return form


def _gelu_form(x: Tensor, form: str) -> Tensor:
    """``form`` of GELU computed by torch's own functions (an nn.GELU site swapped to its own form
    computes the same bits)."""
    if form == "sigmoid":
        return x * torch.sigmoid(1.702 * x)
    return torch.nn.functional.gelu(x, approximate="none" if form == "exact" else "tanh")


@dataclass(frozen=True)
class Change:
    """How much the model's outputs moved: ``max`` (largest absolute change) and ``rms`` (RMS of
    the change), each divided by the RMS of the output it was measured on, the worst over the
    model's floating-point outputs (``output`` names the one with the largest ``max``)."""

    max: float
    rms: float
    output: str

    def text(self) -> str:
        return f"{self.max:.1e}/{self.rms:.1e}"


@dataclass
class Site:
    """One activation site: ``kind`` ``"module"`` (``name`` its first qualified name,
    ``also`` its other names when shared) or ``"call"`` (``name`` the module whose forward made it,
    ``code`` the line); ``form`` ``"exact"``, ``"tanh"``, ``"sigmoid"``, ``"silu"``, another
    member's name or ``"unknown"``; ``clip`` (min, max) for a clipped GELU (``gelu_10``);
    ``what`` the class or function; ``calls`` how many times the example forward ran it;
    ``changes`` the :class:`Change` of serving it in each other GELU form."""

    kind: str
    name: str
    form: str
    what: str
    clip: tuple[float, float] | None = None
    code: str | None = None
    also: list[str] = field(default_factory=list)
    calls: int = 0
    changes: dict[str, Change] = field(default_factory=dict)
    target: Any = field(default=None, repr=False)  # the module, or the FunctionalCall

    @property
    def is_gelu(self) -> bool:
        """Whether it computes one of the GELU forms (clipped or not): it can be swapped."""
        return self.form in GELU_FORMS

    def label(self) -> str:
        if self.kind == "module":  # a shared module: one site at several places
            more = f" (+{len(self.also)} place{'s' * (len(self.also) > 1)})" if self.also else ""
            return (self.name or "<model>") + more
        line = (self.code or "").partition(":")[2].partition(" ")[0]
        return f"{self.name or '<model>'} {self.what.partition('(')[0]}:{line}"


class ForwardError(RuntimeError):
    """The model's forward failed on the example inputs (before anything was swapped)."""


@dataclass
class AuditReport:
    """What :func:`audit` found: ``sites`` (modules first, in the order of ``named_modules``,
    then the functional calls in the order the forward made them); ``whole``: per GELU form, the
    :class:`Change` with every GELU site that ran computing that form (absent: every one already
    does); ``noise``: the change between two forwards with nothing swapped (0 on a deterministic
    model: the floor below which a change means nothing); ``outputs``: the outputs compared,
    ``(name, shape)``. With ``trained_with``: ``differing``, the GELU sites computing another
    form, and ``mismatch``, the change from serving the model as built instead of in that form
    (None when no site differs). ``print(report)`` shows it in 100 columns; :meth:`to_dict` for
    JSON."""

    sites: list[Site]
    whole: dict[str, Change]
    noise: Change
    outputs: list[tuple[str, tuple[int, ...]]]
    trained_with: str | None = None
    differing: list[Site] = field(default_factory=list)
    mismatch: Change | None = None
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Sites per form (a clipped GELU counted under its form), e.g. ``{"exact": 12}``."""
        counts: dict[str, int] = {}
        for site in self.sites:
            counts[site.form] = counts.get(site.form, 0) + 1
        return counts

    def __str__(self) -> str:
        return "\n".join(_render(self))

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (every site in full, every change)."""

        def change(c: Change | None) -> dict[str, Any] | None:
            return None if c is None else {"max": c.max, "rms": c.rms, "output": c.output}

        sites = [
            {
                "kind": s.kind,
                "name": s.name,
                "also": s.also,
                "what": s.what,
                "form": s.form,
                "clip": list(s.clip) if s.clip else None,
                "code": s.code,
                "calls": s.calls,
                "changes": {form: change(c) for form, c in s.changes.items()},
            }
            for s in self.sites
        ]
        return {
            "sites": sites,
            "counts": self.counts(),
            "whole_model": {form: change(c) for form, c in self.whole.items()},
            "noise": change(self.noise),
            "outputs": [{"name": n, "shape": list(shape)} for n, shape in self.outputs],
            "trained_with": self.trained_with,
            "differing": [s.name for s in self.differing],
            "mismatch": change(self.mismatch),
            "change_is": "|served - as built| / RMS(as built output), worst output; max and RMS",
            "notes": self.notes,
        }


# ------------------------------------------------------------------------------ finding the sites


def _member_form(member: nn.Module) -> tuple[str, tuple[float, float] | None]:
    """The form of a gelus module (one ``gelus.patch`` would put in, or the model's own)."""
    if isinstance(member, M.ClippedGELU):
        return _APPROXIMATE.get(member.approximate, "unknown"), (member.min, member.max)
    if isinstance(member, M.GELU):  # QuickGELU too: GELU("sigmoid")
        return _APPROXIMATE.get(member.approximate, "unknown"), None
    if isinstance(member, M.SiLU):
        return "silu", None
    return type(member).__name__.lower(), None  # another member: not swapped between GELU forms


def _module_form(module: nn.Module) -> tuple[str, tuple[float, float] | None] | None:
    """``(form, clip)`` of an activation module, or None: not an activation of the family. A
    class's form is read from ``gelus.patch``'s table (the member it maps the class to)."""
    cls = type(module)
    if cls.__module__.split(".")[0] == "gelus":
        return _member_form(module) if isinstance(module, M._Member) else None
    convert = _MEMBERS.get(_key(cls))
    if convert is not None:
        try:
            return _member_form(convert(module))
        except Exception:  # settings its own class refuses (nn.GELU(approximate="sigmoid") by hand)
            return "unknown", None
    leaf = next(module.children(), None) is None
    named = any(word in cls.__name__.lower() for word in _FAMILY_WORDS)
    if leaf and named and not cls.__module__.startswith("torch."):
        return "unknown", None  # a GELU of the model's own: its formula is not known here
    return None


def _module_sites(model: nn.Module) -> list[Site]:
    """One site per activation module object (a shared one lists its other names in ``also``)."""
    sites: dict[int, Site] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        if id(module) in sites:
            sites[id(module)].also.append(name)
            continue
        found = _module_form(module)
        if found is not None:
            cls = type(module)
            what = f"{cls.__module__.split('.')[0]}:{cls.__qualname__}"
            sites[id(module)] = Site("module", name, found[0], what, found[1], target=module)
    return list(sites.values())


def _call_form(function: str) -> str:
    if function.startswith("F.gelu"):
        return "tanh" if "'tanh'" in function else "exact"
    return "silu"


# ------------------------------------------------------------------------------ running it


class _AuditMode(TorchFunctionMode):
    """Records each functional GELU / SiLU call site of the forward (as ``patch``'s routing names
    them) and computes a site listed in ``swaps`` in the form given there; every other call is
    torch's, unchanged."""

    def __init__(
        self, recorder: FunctionalRouting, swaps: dict[FunctionalCall, str], inside: set[str]
    ) -> None:
        super().__init__()
        self.recorder, self.swaps, self.inside = recorder, swaps, inside

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func is _F_GELU or func is _F_SILU:
            x = args[0] if args else kwargs.get("input")
            approximate = kwargs.get("approximate", "none")
            if isinstance(x, Tensor) and x.is_floating_point() and approximate in ("none", "tanh"):
                frame = _caller()  # called here: two frames up is the dispatch or the caller
                # not gelus's own code (this module's swaps included), nor an activation module's
                # forward computing itself (nn.GELU, HF's GELUActivation): that site is the module
                if not _from_gelus(frame) and self.recorder._place(frame) not in self.inside:
                    if func is _F_GELU:
                        function = f"F.gelu(approximate={approximate!r})"
                    else:
                        inplace = bool(args[1] if len(args) > 1 else kwargs.get("inplace", False))
                        function = "F.silu(inplace=True)" if inplace else "F.silu"
                    form = self.swaps.get(self.recorder._record(function, frame))
                    if form is not None:
                        return _gelu_form(x, form)
        return func(*args, **kwargs)


_ABSENT = object()


def _module_forward(site: Site, original: Callable, form: str | None) -> Callable:
    """The forward a module site runs during one audit forward: its own (``form`` None), or the
    GELU ``form`` (clipped as the site clips); each counts the site's calls."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        site.calls += 1
        if form is None:
            return original(*args, **kwargs)
        y = _gelu_form(args[0] if args else kwargs["input"], form)
        return y.clamp(*site.clip) if site.clip else y

    return forward


@contextlib.contextmanager
def _forwards_set(sites: list[Site], swaps: dict[int, str]) -> Iterator[None]:
    """Each module site's :func:`_module_forward` set on its instance, for one forward; then each
    instance's ``__dict__`` as it was (its own ``forward``, if it had one, put back)."""
    saved: list[tuple[nn.Module, object]] = []
    try:
        for site in sites:
            module = site.target
            saved.append((module, module.__dict__.get("forward", _ABSENT)))
            site.calls = 0
            module.forward = _module_forward(site, module.forward, swaps.get(id(site)))
        yield
    finally:
        for module, own in reversed(saved):
            if own is _ABSENT:
                del module.__dict__["forward"]
            else:
                module.__dict__["forward"] = own


def _flatten(out: Any, name: str = "output") -> list[tuple[str, Tensor]]:
    """The floating-point tensors of a model's output, named (``logits``, ``output[1]``, …); a
    cache object or anything else that is not a tensor, mapping or sequence is left out."""
    if isinstance(out, Tensor):
        return [(name, out)] if out.is_floating_point() and out.numel() else []
    if isinstance(out, Mapping):  # transformers' ModelOutput is an OrderedDict
        items = [(str(k) if name == "output" else f"{name}.{k}", v) for k, v in out.items()]
    elif isinstance(out, list | tuple):
        items = [(f"{name}[{i}]", v) for i, v in enumerate(out)]
    else:
        return []
    return [pair for key, value in items for pair in _flatten(value, key)]


def _change(base: list[tuple[str, Tensor]], other: list[tuple[str, Tensor]]) -> Change:
    """The worst relative change over the outputs (each output's |Δ| over its own RMS)."""
    worst = Change(0.0, 0.0, base[0][0])
    rms_worst = 0.0
    for (name, b), (_, o) in zip(base, other, strict=True):
        b64, o64 = b.detach().double(), o.detach().double()
        scale = b64.square().mean().sqrt().item() or 1.0  # an all-zero output: absolute change
        d = (o64 - b64).abs()
        largest, rms = d.max().item() / scale, d.square().mean().sqrt().item() / scale
        if largest > worst.max or math.isnan(largest):
            worst = Change(largest, worst.rms, name)
        rms_worst = max(rms_worst, rms) if not math.isnan(rms) else rms
    return Change(worst.max, rms_worst, worst.output)


class _Runner:
    """Runs the model's forward on the example inputs with given sites swapped."""

    def __init__(self, model: nn.Module, sites: list[Site], args: tuple, kwargs: dict) -> None:
        self.model, self.module_sites, self.args, self.kwargs = model, sites, args, kwargs
        self.recorder = FunctionalRouting(model)  # a record of call sites only: not installed
        self.recorder._names = _module_names(model)
        self.inside = {name for site in sites for name in [site.name, *site.also]}

    def forward(self, swaps: list[tuple[Site, str]]) -> list[tuple[str, Tensor]]:
        modules = {id(site): form for site, form in swaps if site.kind == "module"}
        calls = {site.target: form for site, form in swaps if site.kind == "call"}
        self.recorder._seen = {}
        with (
            _forwards_set(self.module_sites, modules),
            _AuditMode(self.recorder, calls, self.inside),
        ):
            return _flatten(self.model(*self.args, **self.kwargs))

    def call_sites(self) -> list[Site]:
        """The functional call sites the last forward made, with their numbers of calls."""
        return [
            Site("call", c.name, _call_form(c.function), c.function, code=c.code, calls=n, target=c)
            for c, n in self.recorder._seen.items()
        ]


@contextlib.contextmanager
def _serving(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout: the forwards are comparable) and no autograd; every module's
    training flag put back afterwards."""
    flags = [(module, module.training) for module in model.modules()]
    try:
        model.eval()
        with torch.no_grad():
            yield
    finally:
        for module, flag in flags:
            module.training = flag


def _measure(
    runner: _Runner, base: list[tuple[str, Tensor]], sites: list[Site]
) -> tuple[Change, dict[str, Change]]:
    """Fill each GELU site's changes; the run-to-run noise and the whole-model changes."""
    noise = _change(base, runner.forward([]))
    swappable = [s for s in sites if s.is_gelu and s.calls]  # a module never run changes nothing
    for site in swappable:
        for form in GELU_FORMS:
            if form != site.form:
                site.changes[form] = _change(base, runner.forward([(site, form)]))
    whole = {}
    for form in GELU_FORMS:
        swaps = [(s, form) for s in swappable if s.form != form]
        if swaps:
            whole[form] = _change(base, runner.forward(swaps))
    return noise, whole


def audit(
    model: nn.Module, *example_inputs: Any, trained_with: str | None = None, **example_kwargs: Any
) -> AuditReport:
    """Every activation site of ``model`` with its form, and what serving it in another GELU
    form changes in ``model(*example_inputs, **example_kwargs)``.

    Sites: activation modules (torch's ``nn.GELU`` in each form and ``nn.SiLU``, every class of
    transformers and timm that ``gelus.patch`` knows, gelus's own; an unknown leaf class whose name
    says GELU, SiLU or Swish is listed with form ``"unknown"``) and the functional ``F.gelu`` (both
    forms) and ``F.silu`` calls the forward makes. For each GELU site (exact, tanh, sigmoid;
    clipped ones keep their clip) the model runs once per other form with that site alone
    swapped, and once per form with every GELU site swapped; each :class:`Change` is the
    largest and the RMS absolute change of the outputs, over the RMS of the output, worst over
    the floating-point outputs. Forwards run in eval mode under ``torch.no_grad``.

    ``trained_with`` (``"exact"``, ``"tanh"``, ``"sigmoid"``, or a name such as ``"gelu_new"``):
    the form the checkpoint was trained with; the report lists the GELU sites computing another
    form and the change from serving the model as built instead of in that form.

    The model is left as it was: the same modules, parameters, buffers, hooks and training flags.

    Raises:
        TypeError: ``model`` is not an nn.Module. ValueError: ``trained_with`` names no GELU form.
        ForwardError: the forward fails on the example inputs.

    Example::

        >>> model = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.Linear(8, 2))
        >>> report = gelus.audit(model, torch.randn(16, 4), trained_with="exact")
        >>> [(s.name, s.form) for s in report.differing]
        [('1', 'tanh')]
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"gelus.audit expects an nn.Module, got {type(model).__name__}")
    trained = None if trained_with is None else parse_form(trained_with)
    sites = _module_sites(model)
    runner = _Runner(model, sites, example_inputs, example_kwargs)
    with _serving(model):
        try:
            base = runner.forward([])
        except Exception as error:
            raise ForwardError(f"{type(error).__name__}: {error}") from error
        if not base:
            raise ForwardError("the model's output holds no floating-point tensor to compare")
        sites = sites + runner.call_sites()  # the runner keeps its list of modules
        noise, whole = _measure(runner, base, sites)
    outputs = [(name, tuple(t.shape)) for name, t in base]
    report = AuditReport(sites, whole, noise, outputs, trained)
    if FunctionalRouting.of(model) is not None:  # its mode, inside ours, takes the calls first
        report.notes.append(
            "gelus.patch(functional=True) routes this model's F.gelu/F.silu calls to gelus, so "
            "none is seen here: audit before patching, or report.functional.remove() first"
        )
    if trained is not None:
        report.differing = [s for s in sites if s.is_gelu and s.calls and s.form != trained]
        report.mismatch = whole.get(trained) if report.differing else None
    return report


# ------------------------------------------------------------------------------ the text report

_WIDTH = 100
_LABEL = 39
# unit roundoff of the serving dtypes: what a relative change compares with
_SCALE = "float32 6.0e-08, float16 4.9e-04, bfloat16 3.9e-03"


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` columns: its end kept (a layer's name ends with what it is)."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _row(label: str, form: str, calls: str, cells: list[str]) -> str:
    cells_text = "".join(f" {cell:<15}" for cell in cells)
    return f"{_cut(label, _LABEL):<{_LABEL}} {form:<7} {calls:>4}{cells_text}".rstrip()


def _site_row(site: Site) -> str:
    label = site.label() + (f" clip[{site.clip[0]:g},{site.clip[1]:g}]" if site.clip else "")
    if not site.is_gelu:
        note = "not run" if not site.calls else "not a GELU form: not swapped"
        return _row(label, site.form, str(site.calls), [note])
    if not site.calls:
        return _row(label, site.form, "0", ["not run by the example inputs"])
    cells = [site.changes[f].text() if f in site.changes else "(as built)" for f in GELU_FORMS]
    return _row(label, site.form, str(site.calls), cells)


def _render(report: AuditReport) -> list[str]:
    counts = ", ".join(f"{form} ×{n}" for form, n in report.counts().items()) or "none"
    modules = sum(site.kind == "module" for site in report.sites)
    lines = [
        f"activation sites: {len(report.sites)} ({modules} module{'s' * (modules != 1)}, "
        f"{len(report.sites) - modules} functional calls): {counts}",
        f"outputs compared: {', '.join(n for n, _ in report.outputs)}"[:_WIDTH],
        "served in another form: max/rms of |Δoutput| ÷ RMS(output), worst output; "
        f"run-to-run: {report.noise.max:.1e}",
        "",
        _row("site", "form", "runs", [f"→ {form}" for form in GELU_FORMS]),
    ]
    lines += [_site_row(site) for site in report.sites]
    if any(site.is_gelu and site.calls for site in report.sites):
        cells = [report.whole[f].text() if f in report.whole else "(as built)" for f in GELU_FORMS]
        lines.append(_row("every GELU site at once", "", "", cells))
    lines.append(f"for scale, rounding of one value: {_SCALE}")
    lines += [textwrap.fill(note, _WIDTH, initial_indent="note: ") for note in report.notes]
    if report.trained_with is not None:
        lines += ["", *_trained_lines(report)]
    return lines


def _trained_lines(report: AuditReport) -> list[str]:
    form = report.trained_with
    gelu = [site for site in report.sites if site.is_gelu and site.calls]
    if not gelu:
        return [f"trained with {form}: the example forward ran no GELU site; nothing to compare"]
    if not report.differing:
        return [f"trained with {form}: every GELU site computes {form}, as in training"]
    built = {}
    for site in report.differing:
        built[site.form] = built.get(site.form, 0) + 1
    names = ", ".join(site.label() for site in report.differing)
    mismatch = report.mismatch
    return [
        f"trained with {form}: {len(report.differing)} of {len(gelu)} GELU sites compute another "
        f"form ({', '.join(f'{f} ×{n}' for f, n in built.items())}):",
        "  " + (names if len(names) <= _WIDTH - 2 else names[: _WIDTH - 3] + "…"),
        f"served as built, not as trained, the outputs change by max {mismatch.max:.1e}, "
        f"rms {mismatch.rms:.1e}",
        f"(÷ RMS of {mismatch.output}); to serve the trained form, build each listed site "
        f"in {form} form",
    ]
