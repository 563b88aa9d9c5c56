"""The GELU family as pure tensor -> tensor functions.

Every activation of the library lives here under the name of its math; the modules in
:mod:`gelus.modules` store hyperparameters and call these in a one-line ``forward``.

    gelu(x, approximate="none" | "tanh" | "sigmoid")   x·Φ(x) and its two classic approximations
    silu(x), swish(x, beta)                            x·σ(x), x·σ(βx)
    generalized_gelu(x, mu, sigma)                     x·Φ((x − μ)/σ)
    stochastic_gelu(x, training, generator)            x·m, m ~ Bernoulli(Φ(x)); E = x·Φ(x)
    bias_gelu(x, bias, approximate)                    gelu(x + bias)
    geglu(x, dim, approximate)                         a · gelu(b) for x = [a, b] split on ``dim``
"""

from gelus._generalized import generalized_gelu
from gelus._pointwise import APPROXIMATIONS, bias_gelu, geglu, gelu, silu, swish
from gelus._stochastic import stochastic_gelu

__all__ = [
    "APPROXIMATIONS",
    "bias_gelu",
    "geglu",
    "gelu",
    "generalized_gelu",
    "silu",
    "stochastic_gelu",
    "swish",
]
