"""Device time and host time of a call, apart: the clocks of ``gelus bench kernels --device cuda``.

On a GPU a call costs two things that overlap: the host's work to issue it (Python, the
dispatcher, autograd, the Triton launcher, the CUDA driver) and the device's work to run it. Wall
time shows the larger of the two, so a benchmark that reads the wall clock at 2^16 elements
measures the host and at 2^28 the device. This module measures them apart:

``device time``
    the call captured once into a CUDA graph (:func:`replayable`, ``repeat`` calls per graph at
    small sizes) and the graph replayed ``calls`` times between two CUDA events
    (:func:`device_timer`): what the GPU spends on the call's kernels, without the host's
    launch gaps. A replay runs exactly the kernels of ``repeat`` eager calls (the library draws a
    stochastic mask's seed on the host, so a replay reuses it, which changes no cost). A call
    that cannot be captured (a host sync inside it) is timed eagerly between the events
    instead, and says so (``method="events"``): the larger of host and device time.
``host time``
    the wall-clock time of one eager call with the device drained before it and no sync in the
    timed region (:func:`host_times`): the launches are queued, not waited for.
``host time, launches stubbed``
    the same with every Triton launch replaced by a no-op (:func:`stubbed_launches`): the
    library's own host work per call, the figure issue 30 sets a limit on (≤ 40 µs per forward +
    backward of a per-channel member). Without a GPU, :func:`cuda_route_on_cpu` sends CPU
    tensors through the library's CUDA route (the same Python, with the kernels stubbed), so
    this is measured on any machine. It is a proxy there: a torch call on CPU computes on the
    host what a CUDA one queues for the device (a full-size reduction costs its arithmetic
    here, a launch there), and issuing it skips the CUDA driver.

On CPU (the tests) the device clock is the wall clock.
"""

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from gelus.bench.timing import Timer, time_calls

__all__ = [
    "Replay",
    "cuda_route_on_cpu",
    "device_timer",
    "host_times",
    "replayable",
    "stubbed_launches",
]


@dataclass
class Replay:
    """A zero-argument callable that runs ``repeat`` calls of a function (a graph replay, or the
    calls themselves), and how: ``"graph"`` (CUDA graph), ``"events (why capture failed)"``
    (eager calls between CUDA events) or ``"wall"`` (CPU)."""

    run: Callable[[], object]
    repeat: int
    method: str
    graph: object = None  # the CUDA graph (kept alive with its memory pool), or None

    def __call__(self) -> None:
        self.run()


def _repeat_for(numel: int) -> int:
    # Small calls: several per graph (toward 4 M elements, at most 16 calls: 16 at 2^16, 4 at
    # 2^20), so that the device, not the few µs of host work to launch a replay, sets the pace.
    return max(1, min(16, (1 << 22) // max(numel, 1)))


def replayable(fn: Callable[[], object], device: str, numel: int) -> Replay:
    """``fn`` (one forward + backward, say) captured into a CUDA graph on ``device == "cuda"``, or
    ``fn`` itself (eagerly timed) where capture fails or on CPU. ``fn`` has run at least once
    (Triton's compile, the allocator's warm-up) before this is called."""
    if device != "cuda":
        return Replay(fn, 1, "wall")
    repeat = _repeat_for(numel)
    try:
        # Capture needs the call warmed up on a side stream first (torch.cuda.graphs docs): the
        # autograd engine and the caching allocator settle there, outside the capture.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(repeat):
                fn()  # outputs dropped: their memory is reused within the graph's pool
        torch.cuda.synchronize()
        return Replay(graph.replay, repeat, "graph", graph)
    except Exception as error:  # a host sync or an uncapturable op in fn: time it eagerly
        torch.cuda.synchronize()
        reason = f"{type(error).__name__}: {error}".splitlines()[0][:160]
        return Replay(fn, 1, f"events ({reason})")


def device_timer(device: str) -> Timer:
    """``(replay, calls) -> seconds per call of the replayed function`` on the device's clock:
    CUDA events around ``calls`` back-to-back replays (one sync at the end), or the wall clock
    on CPU; divided by the replay's ``repeat``."""

    def per_call(fn: Callable[[], object], calls: int) -> float:
        repeat = getattr(fn, "repeat", 1)
        if device != "cuda":
            return time_calls(fn, calls) / repeat
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3 / (calls * repeat)

    return per_call


def host_times(fn: Callable[[], object], calls: int, device: str) -> list[float]:
    """Wall-clock seconds of each of ``calls`` calls of ``fn``, the device drained before each
    call and not waited for inside it (the host's cost of issuing the call)."""
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    for _ in range(calls):
        synchronize()
        start = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - start) * 1e-9)
    synchronize()
    return times


@contextlib.contextmanager
def stubbed_launches() -> Iterator[list[str]]:
    """Every Triton kernel launch of the library (compiled or interpreted) becomes a no-op inside
    the block (``gelus._triton.launches_stubbed``: the host functions launch through the
    library's one ``launch``); yields the list of the kernels' names that were called, in
    order. The outputs the host functions allocate are then left unwritten: time, don't read
    them."""
    from gelus._triton import launches_stubbed

    # Unwritten outputs hold whatever memory held: subnormal garbage would slow the CPU's
    # arithmetic on them 100-fold (torch's default is not to flush; restored below).
    torch.set_flush_denormal(True)
    try:
        with launches_stubbed() as launches:
            yield launches
    finally:
        torch.set_flush_denormal(False)


def cuda_route_on_cpu() -> contextlib.AbstractContextManager[None]:
    """Inside the block, CPU floating-point tensors take the library's CUDA route
    (``gelus._operator.cpu_takes_route_of("cuda", ...)``): every operator of
    :data:`gelus._cuda.CUDA_KERNELS` runs its CUDA kernel (the Triton host functions) where a
    CUDA tensor would, through the same Python and dispatcher, and the eager forward skips the
    CPU-only finiteness hint. Undone on exit. The kernels themselves then need Triton's
    interpreter, or :func:`stubbed_launches`."""
    from gelus import _cuda, _operator

    return _operator.cpu_takes_route_of("cuda", _cuda.CUDA_KERNELS)
