"""Host time and torch calls of the parameter members' CUDA route, measured without a GPU.

CPU tensors take the library's CUDA route (``gelus.bench.device_timing.cuda_route_on_cpu``) and
every Triton launch is a no-op that only counts (``gelus._triton.launches_stubbed``), so what is
timed is the Python and torch work around the launches: the member's autograd Function, the
operator dispatch, the host functions of ``gelus._triton.ops`` (layout checks, grids, buffers,
parameter vectors, reductions). On CUDA the launches are counted by the same seam's names in a
first, stubbed call, then timed for real.

    python3 tools/host_time_params.py [--repeat 2000] [--ops]
    python3 tools/host_time_params.py --device cuda     # on a GPU: real launches, CUDA tensors

For each member (bias-GELU with a bias, Swish with a tensor β, generalized GELU with μ and σ;
torch's ``F.gelu(x + b)`` and ``F.gelu(x)`` beside them, for scale),
in two layouts ([8, 256] with C = 256 on the last dim, NCHW [2, 16, 4, 4] with C = 16 on dim
1; small, so that the CPU's own arithmetic in torch ops stays small beside their host cost), it
prints one forward + backward (the public function with autograd, x,
the parameters requiring grad): the median host time in µs over ``--repeat`` calls, the torch
operators the profiler sees at top level (CPU events without an aten parent), how many of them
reduce (``sum``), and the kernel launches. With ``--device cuda`` the same on CUDA tensors,
launches included (Triton's launcher is part of the host time there; the GPU is synchronized
between calls, outside the timing).
"""

import argparse
import contextlib
import os
import statistics
import time

import torch
import torch.nn.functional as TF

import gelus
from gelus import _triton
from gelus import functional as F


def _cases(device):
    g = torch.Generator().manual_seed(0)
    for name, shape, pshape in (
        ("last dim, C=256", (8, 256), (256,)),
        ("NCHW, C=16", (2, 16, 4, 4), (16, 1, 1)),
    ):
        x = torch.randn(shape, generator=g).to(device).requires_grad_()
        grad = torch.randn(shape, generator=g).to(device)
        p = torch.randn(pshape, generator=g).to(device).requires_grad_()
        s = (torch.rand(pshape, generator=g) + 0.5).to(device).requires_grad_()
        yield f"bias_gelu, {name}", (lambda x=x, p=p: F.bias_gelu(x, p)), grad, (x, p)
        yield f"swish β, {name}", (lambda x=x, p=p: F.swish(x, p)), grad, (x, p)
        yield (
            f"generalized μ σ, {name}",
            (lambda x=x, p=p, s=s: F.generalized_gelu(x, p, s)),
            grad,
            (x, p, s),
        )
        # torch's own compositions on the same tensors, for scale (they compute on the CPU, a
        # few µs at these sizes)
        yield f"torch F.gelu(x + b), {name}", (lambda x=x, p=p: TF.gelu(x + p)), grad, (x, p)
        yield f"torch F.gelu(x), {name}", (lambda x=x: TF.gelu(x)), grad, (x,)


def _step(f, grad, leaves):
    for t in leaves:
        t.grad = None
    f().backward(grad)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--ops", action="store_true", help="list the top-level torch ops")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    cuda = args.device == "cuda"
    with contextlib.ExitStack() as route:
        if not cuda:
            os.environ.setdefault("TRITON_INTERPRET", "1")  # (nothing is launched: only counted)
            from gelus.bench.device_timing import cuda_route_on_cpu  # (σ unchecked, as on CUDA)

            route.enter_context(cuda_route_on_cpu())
            route.enter_context(_triton.launches_stubbed())
        _triton.load()
        _table(args, cuda)


def _launches(f, grad, leaves) -> int:
    """The Triton launches of one forward + backward (counted with the launches stubbed)."""
    with _triton.launches_stubbed() as launches:
        _step(f, grad, leaves)
    return len(launches)


def _table(args, cuda: bool) -> None:
    """One line per case: host µs, top-level torch ops, sums, launches."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    launches = "launches timed" if cuda else "launches stubbed"
    print(f"torch {torch.__version__}, gelus {gelus.__version__}; fwd + bwd, {launches}")
    print(f"{'case':36} {'host µs':>8} {'torch ops':>9} {'sums':>5} {'launches':>8}")
    for name, f, grad, leaves in _cases(args.device):
        for _ in range(50):  # warm the caches (and compile the kernels)
            _step(f, grad, leaves)
        times = []
        for _ in range(args.repeat):
            sync()
            start = time.perf_counter()
            _step(f, grad, leaves)
            times.append(time.perf_counter() - start)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            _step(f, grad, leaves)
        top = [e for e in prof.events() if e.name.startswith("aten::") and _top(e)]
        sums = sum(e.name in ("aten::sum", "aten::sum_to_size") for e in top)
        us = statistics.median(times) * 1e6
        print(f"{name:36} {us:8.1f} {len(top):9d} {sums:5d} {_launches(f, grad, leaves):8d}")
        if args.ops:
            print("    " + " ".join(e.name.removeprefix("aten::") for e in top))


def _top(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True


if __name__ == "__main__":
    main()
