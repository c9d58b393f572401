"""Shared benchmark machinery: ceilings, CUDA-graph timing, L2-rotated buffers, targets, results.

Used by ``bench/mamba2.py`` and ``bench/gdn.py``. Everything that needs a GPU imports torch lazily
and checks for a device at call time; the pure-Python parts (targets, rotation sizing, tables,
results files) run anywhere and are tested on CPU in ``tests/bench/``.

Timing method (docs/benchmarks.md): one CUDA graph replays a whole list of step callables (for
example a full replay window of L decode steps, each on a different rotated buffer set), CUDA
events bracket every replay, the time per call is the replay time divided by the number of
callables, and the median, p10 and p90 over many replays are reported.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import statistics
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..config import ring_capacity_for

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "bench" / "results"
BENCHMARKS_MD = REPO_ROOT / "docs" / "benchmarks.md"

#: H200 L2 size as PyTorch reports it (60 MiB); used when no device can be asked.
H200_L2_BYTES = 60 * 2**20
#: Rotated buffer sets must total at least this many times the L2 size.
L2_ROTATION_FACTOR = 4


# ----------------------------------------------------------------------------------------------
# Bandwidth ceiling
# ----------------------------------------------------------------------------------------------
# RSSM_* variables that do not select kernels (where the library or the commit come from, build options):
# left out of the recorded command
_NON_KERNEL_ENV = ("RSSM_GIT_COMMIT", "RSSM_KERNEL_LIB", "RSSM_BUILD_KERNELS", "RSSM_BUILD_JOBS", "RSSM_CUDA_ARCHS",
                   "RSSM_VENV")


def kernel_switches(env: Optional[Mapping[str, str]] = None) -> str:
    """The RSSM_* A/B switches set in ``env`` (default: this process's environment) as ``NAME=VALUE``
    words, sorted, so that a recorded command runs the same kernels (docs/switches.md)."""
    env = os.environ if env is None else env
    return " ".join(f"{k}={env[k]}" for k in sorted(env) if k.startswith("RSSM_") and k not in _NON_KERNEL_ENV)


def command_line(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> str:
    """The benchmark command as a user types it (``replayssm-trtllm bench ...``), without this
    machine's paths: argv[0] (a path to __main__.py or the console script) is replaced by the CLI name.
    RSSM_* switches set in the environment (``env``, default this process's) come first."""
    import sys
    args = list(sys.argv if argv is None else argv)
    sw = kernel_switches(env)
    return " ".join(([sw] if sw else []) + ["replayssm-trtllm"] + args[1:])


def measure_copy_bandwidth(nbytes: int = 4 << 30, reps: int = 10, warmup: int = 2,
                           device: Any = None) -> float:
    """Device-to-device copy bandwidth in GB/s (1e9 B/s), counting bytes read plus bytes written.

    Copies an ``nbytes`` buffer of random bytes into another one ``reps`` times, times each copy
    with CUDA events and returns ``2 * nbytes / median_time``. Needs ``2 * nbytes`` of free
    device memory (8 GiB at the default 4 GiB).
    """
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("measure_copy_bandwidth: needs a CUDA device; none is available")
    if nbytes <= 0 or reps <= 0:
        raise ValueError(f"measure_copy_bandwidth: nbytes and reps must be positive; got {nbytes}, {reps}")
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev).random_(0, 256)
    dst = torch.empty_like(src)
    for _ in range(warmup):
        dst.copy_(src)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        dst.copy_(src)
        e.record()
    torch.cuda.synchronize(dev)
    ms = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))
    del src, dst
    return 2.0 * nbytes / (ms * 1e-3) / 1e9


# ----------------------------------------------------------------------------------------------
# Settling after large allocations and frees
# ----------------------------------------------------------------------------------------------
# The seventieth session (H100, scripts/conv_placement_ab.py) timed the same conventional GDN step at 83% of copy for
# about seven timing rounds right after a larger buffer set (with per-draft pools) was freed and a new one allocated,
# then at 96% again with nothing else changed; three sets timed round-robin with no large free before them ran at 96%
# from the first round. So the bandwidth a kernel sees right after large allocations or frees is transiently lower (a
# background activity of the driver; the mechanism is not established). Timing a case inside that window
# understates it: the benches wait for a small copy probe to come back to its best before every timed group that
# follows an allocation or a free. See docs/benchmarks.md "Seventieth session".

class GpuClockReader:
    """The GPU's SM and memory clocks (MHz), board power (W) and NVML's clock-event reasons bitmask (power cap,
    thermal or hardware slowdown, ...) through NVML (``nvidia-ml-py``, on the device image), or None from ``read``
    where NVML is missing or fails. ``index`` is NVML's device index (default: this process's CUDA device, which is
    the same on the one-GPU machines). The settle's reports carry these readings, to tell a clock or power
    transient from a memory-traffic one."""

    def __init__(self, index: Optional[int] = None, nvml: Any = None):
        self._nv, self._h = None, None
        try:
            if nvml is None:
                import pynvml as nvml
            nvml.nvmlInit()
            if index is None:
                import torch
                index = torch.cuda.current_device() if torch.cuda.is_available() else 0
            self._h = nvml.nvmlDeviceGetHandleByIndex(int(index))
            self._nv = nvml
        except Exception:
            self._nv, self._h = None, None

    @property
    def available(self) -> bool:
        return self._h is not None

    def read(self) -> Optional[dict]:
        if self._h is None:
            return None
        nv, h = self._nv, self._h
        try:
            out = dict(sm_mhz=int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                       mem_mhz=int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                       power_w=round(nv.nvmlDeviceGetPowerUsage(h) / 1000.0, 1))
            reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons")
            out["reasons"] = hex(int(reasons(h)))
            return out
        except Exception:
            return None

    @staticmethod
    def text(r: Optional[dict]) -> str:
        return "" if not r else f"SM {r['sm_mhz']} MHz, mem {r['mem_mhz']} MHz, {r['power_w']} W, reasons {r['reasons']}"


@dataclass
class SettleResult:
    """One wait for the bandwidth probe: ``waited_s`` seconds, the probe's fraction of its best before
    (``first_frac``) and after (``last_frac``), whether it reached the threshold (``settled``)."""
    waited_s: float
    probes: int
    first_frac: float
    last_frac: float
    settled: bool


def settle_wait(probe: Callable[[], float], best: float, *, fraction: float = 0.97, max_seconds: float = 3.0,
                interval_s: float = 0.02, clock: Callable[[], float] = None,
                sleep: Callable[[float], None] = None) -> "tuple[SettleResult, float]":
    """Calls ``probe()`` (a bandwidth, any unit) until one reading reaches ``fraction`` of the best
    reading seen (``best``, updated by every probe), or ``max_seconds`` pass; sleeps ``interval_s``
    between readings. Returns the result and the updated best. Pure logic (``clock`` / ``sleep``
    default to ``time.monotonic`` / ``time.sleep``): tested on the CPU with scripted probes."""
    import time
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"settle_wait: fraction must be in (0, 1]; got {fraction}")
    if max_seconds < 0 or interval_s < 0:
        raise ValueError(f"settle_wait: max_seconds and interval_s must be >= 0; got {max_seconds}, {interval_s}")
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    t0 = clock()
    first = None
    n = 0
    while True:
        r = float(probe())
        n += 1
        if not math.isfinite(r) or r <= 0:
            raise RuntimeError(f"settle_wait: the probe returned {r!r}; expected a positive bandwidth")
        best = max(best, r)
        if first is None:
            first = r / best
        if r >= fraction * best:
            return SettleResult(clock() - t0, n, first, r / best, True), best
        if clock() - t0 >= max_seconds:
            return SettleResult(clock() - t0, n, first, r / best, False), best
        sleep(interval_s)


class BandwidthSettler:
    """Waits, before a timed group, until an SM copy probe (``torch.mul`` over two ``nbytes`` buffers,
    kept allocated for the whole run so the probe itself allocates nothing) is back to ``fraction``
    of the best it has measured in this process. ``max_seconds = 0`` turns it off. The waits longer
    than ``report_s`` are printed and kept in ``events`` (for the results file). ``reading``, when
    given, replaces the GPU probe (no device needed; the CPU tests use it)."""

    def __init__(self, max_seconds: float = 3.0, fraction: float = 0.97, nbytes: int = 128 << 20,
                 report_s: float = 0.05, log: Callable[[str], None] = print,
                 reading: Optional[Callable[[], float]] = None, calibrate_s: float = 1.0):
        self.max_seconds = float(max_seconds)
        self.fraction = float(fraction)
        self.report_s = float(report_s)
        self.log = log
        self.best = 0.0
        self.events: list = []
        self.waits = 0
        self.total_wait_s = 0.0
        self._buf = None
        self._reading = reading
        self.clocks = GpuClockReader() if reading is None and max_seconds > 0 else None
        self.last_clocks: Optional[dict] = None
        if self.max_seconds < 0 or not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"BandwidthSettler: max_seconds must be >= 0 and fraction in (0, 1]; got "
                             f"{max_seconds}, {fraction}")
        if self.max_seconds > 0 and reading is not None:
            self._calibrate(min(float(calibrate_s), self.max_seconds))
        elif self.max_seconds > 0:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("BandwidthSettler: needs a CUDA device; none is available (pass max_seconds=0)")
            n = max(1, int(nbytes) // 4)
            self._buf = (torch.ones(n, dtype=torch.float32, device="cuda"), torch.empty(n, device="cuda"))
            self._events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            self._calibrate(min(float(calibrate_s), self.max_seconds))

    def _calibrate(self, seconds: float) -> None:
        """The first best: at least 8 readings, and readings every 20 ms for ``seconds`` (the benches build their
        settler right after the copy-bandwidth measurement freed its buffers, so the first readings may fall in the
        very transient the settle is for)."""
        import time
        t0 = time.monotonic()
        n = 0
        while n < 8 or time.monotonic() - t0 < seconds:
            self.best = max(self.best, self.probe())
            n += 1
            if n >= 8:
                time.sleep(0.02)

    @property
    def enabled(self) -> bool:
        return self.max_seconds > 0 and (self._buf is not None or self._reading is not None)

    def probe(self, inner: int = 4, samples: int = 3) -> float:
        """One reading in bytes/s (read + written): the median of ``samples`` timings of ``inner``
        back-to-back SM copies (about a millisecond in all on an H100 / H200)."""
        if self._reading is not None:
            return float(self._reading())
        import torch
        src, dst = self._buf
        a, b = self._events
        seconds = []
        for i in range(samples):
            a.record()
            for _ in range(inner):
                torch.mul(src, 1.0, out=dst)
            b.record()
            if i == samples - 1 and self.clocks is not None:
                self.last_clocks = self.clocks.read()  # while the copies run
            b.synchronize()
            seconds.append(a.elapsed_time(b) * 1e-3)
        return 2.0 * src.numel() * 4 * inner / statistics.median(seconds)

    def settle(self, what: str) -> Optional[SettleResult]:
        """Waits as described above before the group named ``what``; None when turned off."""
        if not self.enabled:
            return None
        if self._buf is not None:
            import torch
            torch.cuda.synchronize()
        first_clocks = []

        def probe():
            r = self.probe()
            if not first_clocks:
                first_clocks.append(self.last_clocks)
            return r
        res, self.best = settle_wait(probe, self.best, fraction=self.fraction, max_seconds=self.max_seconds)
        self.waits += 1
        self.total_wait_s += res.waited_s
        if res.waited_s > self.report_s or not res.settled:
            self.events.append(dict(what=what, waited_s=round(res.waited_s, 3), probes=res.probes,
                                    first_frac=round(res.first_frac, 4), last_frac=round(res.last_frac, 4),
                                    settled=res.settled, clocks_first=first_clocks[0] if first_clocks else None,
                                    clocks_last=self.last_clocks))
            clk = (f" [clocks first: {GpuClockReader.text(first_clocks[0])}; last: "
                   f"{GpuClockReader.text(self.last_clocks)}]") if first_clocks and first_clocks[0] else ""
            self.log(f"# settle before {what}: the copy probe was at {res.first_frac:.1%} of its best, "
                     + (f"back to {res.last_frac:.1%} after {res.waited_s:.2f} s" if res.settled else
                        f"still {res.last_frac:.1%} after {res.waited_s:.2f} s (timed anyway)") + clk)
        return res

    def summary(self) -> dict:
        """For the results file: settings, counts and the reported waits."""
        return dict(max_seconds=self.max_seconds, fraction=self.fraction, waits=self.waits,
                    total_wait_s=round(self.total_wait_s, 3), best_probe_gbps=round(self.best / 1e9, 1),
                    reported=self.events)

    def close(self) -> None:
        self._buf = None
        self._reading = None


def add_settle_argument(parser) -> None:
    """``--settle-seconds`` for the benches (BandwidthSettler's ``max_seconds``)."""
    parser.add_argument("--settle-seconds", type=float, default=3.0,
                        help="before each timed group that follows a large allocation or free, wait up to this many "
                             "seconds for a copy probe to come back to 97%% of its best in this process (0: off; "
                             "docs/benchmarks.md 'Seventieth session')")


# ----------------------------------------------------------------------------------------------
# CUDA-graph timing
# ----------------------------------------------------------------------------------------------
def _percentile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of an already sorted, non-empty sequence."""
    if not sorted_vals:
        raise ValueError("_percentile: empty sequence")
    if len(sorted_vals) == 1:
        return float(sorted_vals[0])
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return float(sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo))


def summarize_times(per_call_us: Iterable[float]) -> dict:
    """{'median_us', 'p10_us', 'p90_us', 'reps'} of a list of per-call times in microseconds."""
    vals = sorted(float(v) for v in per_call_us)
    if not vals:
        raise ValueError("summarize_times: no timings")
    return {"median_us": _percentile(vals, 50), "p10_us": _percentile(vals, 10),
            "p90_us": _percentile(vals, 90), "reps": len(vals)}


def time_graph(step_fns: Sequence[Callable[[], Any]], reps: int = 100, warmup: int = 3,
               graph_warmup: int = 3, allow_eager: bool = True) -> dict:
    """Time a list of callables run in order, captured once into a CUDA graph.

    Each callable is one step (for example one decode step on its own rotated buffer set; a full
    replay window of L steps is a list of L callables). The callables are first run eagerly
    ``warmup`` times (Triton compiles, JIT module loads and lazy allocations happen there, outside
    the capture), then captured in order into one graph on a side stream. The graph is replayed
    ``graph_warmup`` times untimed, then ``reps`` times, each replay bracketed by CUDA events.

    Returns ``{'median_us', 'p10_us', 'p90_us', 'reps', 'calls', 'mode'}``: times per call (replay
    time / len(step_fns)); ``mode`` is 'graph', or 'eager' when capture failed and
    ``allow_eager`` let it fall back (with a warning) to timing the same loop without a graph.
    """
    import torch

    fns = list(step_fns)
    if not fns:
        raise ValueError("time_graph: step_fns is empty")
    if reps <= 0:
        raise ValueError(f"time_graph: reps must be positive; got {reps}")
    if not torch.cuda.is_available():
        raise RuntimeError("time_graph: needs a CUDA device; none is available")

    def run_all():
        for fn in fns:
            fn()

    for _ in range(max(warmup, 1)):
        run_all()
    torch.cuda.synchronize()

    graph = None
    mode = "graph"
    try:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                run_all()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
    except Exception as exc:  # capture failed: an op synced, allocated or is not capturable
        if not allow_eager:
            raise
        warnings.warn(f"time_graph: CUDA graph capture failed ({type(exc).__name__}: {exc}); "
                      f"timing eagerly, launch overhead included", RuntimeWarning, stacklevel=2)
        graph = None
        mode = "eager"
        torch.cuda.synchronize()

    replay = graph.replay if graph is not None else run_all
    for _ in range(graph_warmup):
        replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        replay()
        e.record()
    torch.cuda.synchronize()
    per_call_us = [s.elapsed_time(e) * 1e3 / len(fns) for s, e in zip(starts, ends)]
    out = summarize_times(per_call_us)
    out.update(calls=len(fns), mode=mode)
    del graph
    return out


# ----------------------------------------------------------------------------------------------
# L2-rotated buffer sets
# ----------------------------------------------------------------------------------------------
def l2_cache_bytes(device: Any = None) -> int:
    """L2 size of the device (PyTorch's ``L2_cache_size``), or the H200's 60 MiB without one."""
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
            size = int(getattr(props, "L2_cache_size", 0) or 0)
            if size > 0:
                return size
    except Exception:
        pass
    return H200_L2_BYTES


def tensor_bytes(obj: Any) -> int:
    """Total ``nbytes`` of every tensor in a (nested) tensor / list / tuple / dict / dataclass.

    Tensors reached twice (the same object) are counted once; views of one storage count their
    own ``nbytes`` each, so pass the owning tensors.
    """
    seen: set[int] = set()

    def walk(o: Any) -> int:
        if id(o) in seen:
            return 0
        if hasattr(o, "nbytes") and hasattr(o, "data_ptr"):  # torch.Tensor without importing torch
            seen.add(id(o))
            return int(o.nbytes)
        if isinstance(o, Mapping):
            return sum(walk(v) for v in o.values())
        if isinstance(o, (list, tuple, set)):
            return sum(walk(v) for v in o)
        if hasattr(o, "__dataclass_fields__"):
            return sum(walk(getattr(o, f)) for f in o.__dataclass_fields__)
        return 0

    return walk(obj)


def rotation_count(set_bytes: int, l2_bytes: Optional[int] = None, factor: float = L2_ROTATION_FACTOR,
                   min_count: int = 2, max_count: Optional[int] = None) -> int:
    """How many copies of a buffer set of ``set_bytes`` make ``total >= factor * L2``.

    At least ``min_count`` (so consecutive steps never reuse one set); ``max_count`` caps it (a
    cap below what the factor needs raises, since the timing would then measure the cache).
    """
    if set_bytes <= 0:
        raise ValueError(f"rotation_count: set_bytes must be positive; got {set_bytes}")
    if min_count < 1:
        raise ValueError(f"rotation_count: min_count must be >= 1; got {min_count}")
    l2 = H200_L2_BYTES if l2_bytes is None else int(l2_bytes)
    need = max(min_count, math.ceil(factor * l2 / set_bytes))
    if max_count is not None and need > max_count:
        raise ValueError(f"rotation_count: {need} sets of {set_bytes} B are needed for {factor} x L2 "
                         f"({l2} B); max_count is {max_count}")
    return need


def make_rotated(make_set: Callable[[int], Any], set_bytes: Optional[int] = None,
                 l2_bytes: Optional[int] = None, factor: float = L2_ROTATION_FACTOR,
                 min_count: int = 2, max_count: Optional[int] = None) -> list:
    """Build K buffer sets ``[make_set(0), ..., make_set(K-1)]`` with total bytes >= factor x L2.

    ``make_set(i)`` returns one independent set (dict / tuple / tensor); its size is measured with
    :func:`tensor_bytes` from the first set unless ``set_bytes`` is given. ``l2_bytes`` defaults to
    the current device's L2 (:func:`l2_cache_bytes`).
    """
    first = make_set(0)
    nbytes = tensor_bytes(first) if set_bytes is None else int(set_bytes)
    if nbytes <= 0:
        raise ValueError("make_rotated: the buffer set holds no tensor bytes; pass set_bytes")
    count = rotation_count(nbytes, l2_cache_bytes() if l2_bytes is None else l2_bytes, factor,
                           min_count, max_count)
    return [first] + [make_set(i) for i in range(1, count)]


# ----------------------------------------------------------------------------------------------
# Targets
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """One issue target: ``value`` measured in ``case`` against ``goal``."""

    name: str
    value: Optional[float]
    goal: float
    higher_is_better: bool
    case: str = ""

    @property
    def met(self) -> bool:
        v = self.value
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        return v >= self.goal if self.higher_is_better else v <= self.goal

    def as_dict(self) -> dict:
        return {"value": self.value, "goal": self.goal, "met": self.met, "case": self.case}


def make_target(name: str, value: Optional[float], goal: float, higher_is_better: bool,
                case: str = "") -> dict:
    """``{'value', 'goal', 'met', 'case'}`` of one target (``name`` is the key it is stored under).

    ``met`` is ``value >= goal`` when higher is better, ``value <= goal`` otherwise, and False
    for a missing (None / NaN) value.
    """
    return Target(name, value, goal, higher_is_better, case).as_dict()


def _targets_dict(targets: Any) -> dict:
    """Normalize targets to {name: {'value','goal','met','case'}}."""
    if targets is None:
        return {}
    if isinstance(targets, Mapping):
        out = {}
        for name, t in targets.items():
            out[str(name)] = t.as_dict() if isinstance(t, Target) else dict(t)
        return out
    out = {}
    for t in targets:
        if isinstance(t, Target):
            out[t.name] = t.as_dict()
        elif isinstance(t, Mapping) and "name" in t:
            d = dict(t)
            out[str(d.pop("name"))] = d
        else:
            raise ValueError(f"write_results: a target must be a Target or a dict with 'name'; got {t!r}")
    return out


# ----------------------------------------------------------------------------------------------
# Tables and results
# ----------------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        a = abs(v)
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.3f}"
        if a == 0:
            return "0"
        return f"{v:.4g}"
    return str(v)


def _columns(rows: Sequence[Mapping], columns: Optional[Sequence[str]]) -> list:
    if columns is not None:
        return list(columns)
    cols: list = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    return cols


def format_table(rows: Sequence[Mapping], columns: Optional[Sequence[str]] = None) -> str:
    """Fixed-width text table for the terminal; numbers right-aligned, missing cells '-'.

    ``columns`` picks and orders the columns (default: every key, in first-seen order).
    """
    cols = _columns(rows, columns)
    if not cols:
        return ""
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(str(c))] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                   for r in rows if r.get(c) is not None) for c in cols]

    def line(vals):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(vals, widths, numeric)).rstrip()

    out = [line([str(c) for c in cols]), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    return "\n".join(out)


def markdown_table(rows: Sequence[Mapping], columns: Optional[Sequence[str]] = None) -> str:
    """GitHub markdown table of ``rows`` (same column rules as :func:`format_table`)."""
    cols = _columns(rows, columns)
    if not cols:
        return ""
    out = ["| " + " | ".join(str(c) for c in cols) + " |",
           "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(_fmt(r.get(c)).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out)


def slugify(text: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' (lower case, runs of other characters become one '-')."""
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    return s or "unknown"


def gpu_name() -> str:
    """The CUDA device name, or 'cpu' when there is none."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(torch.cuda.current_device())
    except Exception:
        pass
    return "cpu"


def git_commit(cwd: Optional[Path] = None) -> str:
    """``git rev-parse HEAD`` of the repository ($RSSM_GIT_COMMIT when set, e.g. on a machine that
    received the working tree without .git), 'unknown' if git or a commit is unavailable."""
    if os.environ.get("RSSM_GIT_COMMIT"):
        return os.environ["RSSM_GIT_COMMIT"]
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=str(cwd or REPO_ROOT),
                           capture_output=True, text=True, timeout=10)
        sha = r.stdout.strip()
        if r.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,64}", sha):
            return sha
    except Exception:
        pass
    return "unknown"


def _json_default(o: Any):
    if hasattr(o, "item"):  # numpy / torch scalars
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Target):
        return o.as_dict()
    return str(o)


def write_results(family: str, rows: Sequence[Mapping], targets: Any, command: str,
                  extra: Optional[Mapping] = None, *, results_dir: Optional[Path] = None,
                  benchmarks_md: Optional[Path] = None, gpu: Optional[str] = None,
                  date: Optional[str] = None, columns: Optional[Sequence[str]] = None):
    """Write one benchmark run; returns ``(json_path, latest_path)``.

    Writes ``<results_dir>/<YYYY-MM-DD>-<gpu slug>-<family>.json`` and
    ``<results_dir>/latest-<family>.json`` (same content) with the keys ``family, rows, targets,
    gpu, date, command, git_commit`` (+ ``extra`` when given), and appends a section with the
    command, a rows table and a targets table to ``benchmarks_md``. Defaults:
    ``bench/results/`` and ``docs/benchmarks.md`` of this repository, today's date, the current
    device's name. ``targets`` is a mapping ``name -> make_target(...)`` or a list of
    :class:`Target` (or dicts with a 'name').
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", family or ""):
        raise ValueError(f"write_results: family must be a plain name like 'mamba2'; got {family!r}")
    results_dir = Path(results_dir) if results_dir is not None else RESULTS_DIR
    benchmarks_md = Path(benchmarks_md) if benchmarks_md is not None else BENCHMARKS_MD
    gpu = gpu if gpu is not None else gpu_name()
    date = date if date is not None else _dt.date.today().isoformat()
    tdict = _targets_dict(targets)
    rows = [dict(r) for r in rows]
    payload = {"family": family, "rows": rows, "targets": tdict, "gpu": gpu, "date": date,
               "command": command, "git_commit": git_commit()}
    if extra is not None:
        payload["extra"] = dict(extra)

    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_dir / f"{date}-{slugify(gpu)}-{family}.json"
    latest_path = results_dir / f"latest-{family}.json"
    text = json.dumps(payload, indent=2, default=_json_default) + "\n"
    json_path.write_text(text)
    latest_path.write_text(text)

    _append_results_section(benchmarks_md, f"## {family}: {date}, {gpu}, commit {payload['git_commit'][:12]}",
                            command, rows, columns, tdict, json_path)
    return json_path, latest_path


def _append_results_section(benchmarks_md: Path, title: str, command: str, rows: Sequence[Mapping],
                            columns: Optional[Sequence[str]], targets: Mapping, json_path: Path) -> None:
    """Append ``title``, the command, ``rows`` and ``targets`` as markdown tables and the JSON's path to
    ``benchmarks_md``, one blank line after what is there."""
    section = [title, "", "```", command, "```", "", markdown_table(rows, columns)]
    if targets:
        trows = [{"target": n, **dict(t)} for n, t in targets.items()]
        for t in trows:  # a value that rounds onto its goal keeps the digit that decides met / missed
            if isinstance(t.get("value"), float) and "goal" in t and "met" in t:
                text = target_value_text(t["value"], t["goal"], bool(t["met"]))
                if text != target_value_text(t["value"], None, False):  # more digits than the plain three
                    t["value"] = text
        # the verify targets' achieved bandwidth and traffic bound (bench/step_traffic.py), where a target has them
        extra = [c for c in ("copy_frac", "ratio_at_equal_efficiency", "value_at_equal_efficiency")
                 if any(c in t for t in trows)]
        section += ["", markdown_table(trows, ["target", "value", "goal", "met", *extra, "case"])]
    section += ["", f"Results: `{_relpath(json_path)}`", ""]
    benchmarks_md.parent.mkdir(parents=True, exist_ok=True)
    prefix = ""
    if benchmarks_md.exists():
        old = benchmarks_md.read_text()
        if old and not old.endswith("\n\n"):
            prefix = "\n" if old.endswith("\n") else "\n\n"
    with benchmarks_md.open("a") as f:
        f.write(prefix + "\n".join(section))


def publish_official_run(family: str, out_path: Path, default_out: str, rows: Sequence[Mapping],
                         targets: Mapping, command: str, gpu: str, *, columns: Optional[Sequence[str]] = None,
                         results_dir: Optional[Path] = None, benchmarks_md: Optional[Path] = None,
                         date: Optional[str] = None):
    """After a bench wrote ``out_path`` (its JSON): when that is the official output ``default_out`` (the
    ``--out`` default), copy it to ``<results_dir>/<YYYY-MM-DD>-<gpu slug>-<family>.json`` and append a section
    (command, ``rows`` as a table, the targets) to ``docs/benchmarks.md``. Runs with another ``--out`` (A/B
    timing, scripts/ab_bench.sh) publish nothing. Returns the dated path or None.
    """
    out_path = Path(out_path)
    if out_path.resolve() != (REPO_ROOT / default_out).resolve() and out_path != Path(default_out):
        return None
    results_dir = Path(results_dir) if results_dir is not None else out_path.parent
    benchmarks_md = Path(benchmarks_md) if benchmarks_md is not None else BENCHMARKS_MD
    date = date if date is not None else _dt.date.today().isoformat()
    dated = results_dir / f"{date}-{slugify(gpu)}-{family}.json"
    dated.write_text(out_path.read_text())
    _append_results_section(benchmarks_md, f"## {family} (appended by the bench): {date}, {gpu}, commit "
                            f"{git_commit()[:12]}", command, rows, columns, targets, dated)
    return dated


def _relpath(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


# ---- rings of the benches' layer buffers (bench mamba2 _Layerset, bench gdn _Layers)
def standard_ring_capacity(op: str, window: int, std_capacity: Optional[int] = None) -> int:
    """Ring capacity of the standard steps: L by default (what a standard-mode deployment allocates:
    ReplayConfig.ring_capacity with max_verify = 1; L + 1 before the sixty-eighth session), or ``std_capacity`` in
    [L, 32 L] (L + 1: the earlier deployments' ring; L + Tmax: the speculative steps' ring, as the benchmarks ran
    standard steps before the twenty-ninth session)."""
    cap = ring_capacity_for(window, 1, speculative=False) if std_capacity is None else int(std_capacity)
    if not window <= cap <= 32 * window:
        raise ValueError(f"{op}: std_capacity must be in [L, 32 L] = [{window}, {32 * window}]; got {cap}")
    return cap


class standard_steps_on_ring:
    """``with standard_steps_on_ring(ls, C):`` the standard steps of layer buffers ``ls`` (a ``C_std`` attribute and
    a ``rings`` dict by capacity) run on the ring of capacity ``C`` inside the block (timing the other ring beside
    the official one)."""

    def __init__(self, ls, capacity: int):
        if capacity not in ls.rings:
            raise ValueError(f"standard_steps_on_ring: no ring of capacity {capacity}; have {sorted(ls.rings)}")
        self.ls, self.capacity = ls, capacity

    def __enter__(self):
        self.saved, self.ls.C_std = self.ls.C_std, self.capacity
        return self.ls

    def __exit__(self, *exc):
        self.ls.C_std = self.saved
        return False


def target_value_text(value, goal, met: bool, digits: int = 3, most: int = 6) -> str:
    """``value`` with ``digits`` decimals, or with as many more (up to ``most``) as it takes for the printed number to
    stand on the same side of ``goal`` as the recorded ``met`` flag: 1.7497 against >= 1.75 prints as 1.7497, not as
    a "1.750 ... missed" that reads like a contradiction. ``goal``: a number (the direction, lower or higher is better,
    is the one that agrees with ``met`` for the exact value) or a string "<= x" / ">= x" (the benches' forms). A value
    that is not a number prints as given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    text = f"{value:.{digits}f}"
    lower_is_better = None
    if isinstance(goal, str):
        g = goal.strip()
        for op in ("<=", ">="):
            if g.startswith(op):
                lower_is_better = op == "<="
                g = g[len(op):]
        try:
            goal = float(g)
        except ValueError:
            return text
    if isinstance(goal, bool) or not isinstance(goal, (int, float)):
        return text
    if not (math.isfinite(value) and math.isfinite(goal)) or value == goal:
        return text
    if lower_is_better is None:
        lower_is_better = (value < goal) == met
    for d in range(digits, most + 1):
        text = f"{value:.{d}f}"
        shown = float(text)
        shown_met = shown <= goal if lower_is_better else shown >= goal
        if shown_met == met:
            return text
    return text


# ---- tensor-parallel rank shapes ---------------------------------------------------------------------------------
_RANK_SHAPE = re.compile(r"^(?P<base>.+)-tp(?P<tp>[0-9]+)$")


def resolve_shape(shapes: Mapping[str, Mapping[str, int]], name: str, head_keys: Sequence[str]) -> dict:
    """The layer shape of bench shape ``name``: a key of ``shapes``, or ``BASE-tpN``, one rank of N-way tensor
    parallelism of BASE (``head_keys``, e.g. ("H", "G") for Mamba-2 or ("HV", "H") for GDN, divided by N;
    models/tensor_parallel.py). Raises ValueError naming the choices, or the head count N does not divide."""
    if name in shapes:
        return dict(shapes[name])
    m = _RANK_SHAPE.match(name)
    if m is None or m.group("base") not in shapes:
        raise ValueError(f"unknown shape {name!r}; choose from {list(shapes)} or BASE-tpN (one rank of N-way "
                         f"tensor parallelism, e.g. {next(iter(shapes))}-tp8)")
    tp, sh = int(m.group("tp")), dict(shapes[m.group("base")])
    bad = [f"{k}={sh[k]}" for k in head_keys if tp < 1 or sh[k] % tp]
    if bad:
        raise ValueError(f"shape {name!r}: tp {tp} does not divide {', '.join(bad)}")
    for k in head_keys:
        sh[k] //= tp
    return sh


def is_rank_shape(name: str) -> bool:
    """True for a ``BASE-tpN`` bench shape (:func:`resolve_shape`)."""
    return _RANK_SHAPE.match(name) is not None


def drop_rank_shape_targets(targets: Mapping[str, Any], shapes: Sequence[str]) -> dict:
    """``targets`` without the entries of rank shapes (``BASE-tpN``): the issues' goals are stated for the unsplit
    layers. A target names its shape as a token of its key, between ``_`` / ``.`` or the key's ends (Mamba-2
    ``std_speedup_super-tp8_B256_...``, GDN ``q35-122b-tp8.standard_speedup_...``). Correctness entries
    (``correct_*``) stay."""
    ranks = [re.compile(rf"(^|[_.]){re.escape(s)}([_.]|$)") for s in shapes if is_rank_shape(s)]
    return {k: v for k, v in targets.items() if k.startswith("correct_") or not any(r.search(k) for r in ranks)}
