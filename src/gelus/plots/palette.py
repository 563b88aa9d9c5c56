"""One colour per activation, used by every figure of the project."""

__all__ = ["MARKERS", "PALETTE", "color_for", "label_for", "marker_for"]

# Colour-blind-safe (Okabe & Ito); GELU blue, ReLU orange, ELU green as in the paper's figures.
PALETTE = {
    "gelu": "#0072B2",
    "gelu_tanh": "#56B4E9",
    "gelu_sigmoid": "#CC79A7",
    "relu": "#E69F00",
    "elu": "#009E73",
    "silu": "#D55E00",
    "stochastic_gelu": "#000000",
    # the transformer FFN sweep's gated and squared forms (Tol's bright and muted schemes)
    "geglu": "#332288",
    "swiglu": "#882255",
    "reglu": "#999933",
    "relu2": "#AA4499",
    "generalized_gelu": "#44AA99",
}
_FALLBACK = ("#999999", "#F0E442", "#882255", "#44AA99", "#117733", "#332288")
# A distinct marker too, so that two activations never differ by colour alone.
MARKERS = {
    "gelu": "o", "gelu_tanh": "s", "gelu_sigmoid": "D", "relu": "^", "elu": "v", "silu": "P",
    "stochastic_gelu": "X", "geglu": "<", "swiglu": ">", "reglu": "p", "relu2": "h",
    "generalized_gelu": "*",
}  # fmt: skip
_FALLBACK_MARKERS = ("d", "8", "H", "+", "x", "1", "2", "3")

_LABELS = {
    "gelu": "GELU",
    "gelu_tanh": "GELU (tanh)",
    "gelu_sigmoid": "GELU (sigmoid)",
    "relu": "ReLU",
    "elu": "ELU",
    "silu": "SiLU",
    "stochastic_gelu": "SOI map",
}


def color_for(activation: str) -> str:
    """The activation's colour; names outside ``PALETTE`` get a stable colour of their own."""
    name = activation.lower()
    if name in PALETTE:
        return PALETTE[name]
    return _FALLBACK[sum(map(ord, name)) % len(_FALLBACK)]  # stable across runs, unlike hash()


def marker_for(activation: str) -> str:
    """The activation's marker; names outside ``MARKERS`` get a stable one of the fallbacks, none
    of which a named activation uses."""
    name = activation.lower()
    if name in MARKERS:
        return MARKERS[name]
    return _FALLBACK_MARKERS[(sum(map(ord, name)) // len(_FALLBACK)) % len(_FALLBACK_MARKERS)]


def label_for(activation: str) -> str:
    """The activation's name as the paper writes it (unknown names pass through)."""
    return _LABELS.get(activation.lower(), activation)
