"""The transformer engine: the byte-level language model of transformer-lm."""
