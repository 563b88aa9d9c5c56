"""Test-session setup shared by every test module."""

import os

import torch

# Triton decides at import time whether its kernels (and its own library functions) are compiled
# or interpreted, so the switch must come before anything imports triton. Without CUDA the kernels
# run in the interpreter on CPU tensors (tests/test_triton_kernels.py); this changes nothing else.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
