"""The GPU's clocks, power and temperature sampled in the background while a benchmark runs, so each measurement can
say at what clocks it ran (diagnostics; nothing is decided on them).

Why (H200, 2026-12-04): the same two-stream kernel was timed at 41.3, 32.2 and 41.2 us in three evaluations (a
reward tier apart), and honest kernels ran 7-13% above Nsight Compute's sum on the judge's clock. Neither the judge
nor ncu fixes the clocks (``--clock-control none``; a developer's lease may not change the device's settings), so a
kernel that is partly bound by its SMs runs slower whenever the device has clocked down (power, temperature) and the
memory-bound baselines barely do. Sampled clocks tell that apart from the judge's own overhead.

`ClockSampler` reads NVML (``libnvidia-ml.so.1``, which every NVIDIA driver installs) through ctypes every
``interval_s`` in a thread of the benchmark's own process (never the judge's or a candidate's): SM and memory clocks
(MHz), power (W), temperature (C) and the active clock-event reasons (why the clocks are below their maximum: power
cap, thermal slowdown, idle, ...). `window(t0, t1)` summarises the samples of one measurement, by device. Where NVML
is missing (a CPU machine) it samples nothing and ``error`` says why.

    with ClockSampler() as clocks:
        t0 = time.time(); ...; t1 = time.time()
        row["gpu_clocks"] = clocks.window(t0, t1)
"""
from __future__ import annotations

import ctypes
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
# nvml.h's clock-event (formerly throttle) reason bits
REASONS = {0x1: "idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
           0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}


@dataclass(frozen=True)
class Sample:
    """One reading of one device: host time (``time.time()``), clocks in MHz, power in W, temperature in C, and the
    clock-event reason bits (None where the driver does not report them)."""

    at: float
    device: int
    sm_mhz: int
    mem_mhz: int
    power_w: float
    temp_c: int
    reasons: int | None


def reason_names(bits: int) -> list[str]:
    """The names of the clock-event reason ``bits`` (unknown bits as hex)."""
    names = [name for bit, name in REASONS.items() if bits & bit]
    rest = bits & ~sum(REASONS)
    return names + ([hex(rest)] if rest else [])


class ClockSampler:
    """Samples every visible NVIDIA GPU's clocks in a background thread (see the module's docstring)."""

    def __init__(self, interval_s: float = 0.05) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self.error = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handles: list[tuple[int, ctypes.c_void_p]] = []

    # -- reading NVML -----------------------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise RuntimeError(f"no NVML here (libnvidia-ml.so.1: {exc})") from exc
        if nvml.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit_v2 failed")
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            raise RuntimeError("nvmlDeviceGetCount_v2 failed")
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0:
                self._handles.append((index, handle))
        self._nvml = nvml
        if not self._handles:
            raise RuntimeError("NVML sees no GPU")

    def _read(self, index: int, handle: ctypes.c_void_p) -> Sample | None:
        nvml = self._nvml
        sm, mem, power, temp, bits = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), \
            ctypes.c_ulonglong()
        if nvml.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(sm)) != 0 or \
                nvml.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_MEM, ctypes.byref(mem)) != 0:
            return None
        power_ok = nvml.nvmlDeviceGetPowerUsage(handle, ctypes.byref(power)) == 0
        temp_ok = nvml.nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU, ctypes.byref(temp)) == 0
        reasons: int | None = None
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            getter = getattr(nvml, name, None)
            if getter is not None and getter(handle, ctypes.byref(bits)) == 0:
                reasons = int(bits.value)
                break
        return Sample(time.time(), index, int(sm.value), int(mem.value), power.value / 1000.0 if power_ok else -1.0,
                      int(temp.value) if temp_ok else -1, reasons)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for index, handle in self._handles:
                    sample = self._read(index, handle)
                    if sample is not None:
                        self.add(sample)
            except Exception as exc:  # noqa: BLE001 - diagnostics only: stop sampling, never the benchmark
                self.error = f"sampling stopped: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(self.interval_s)

    # -- the sampler's life -----------------------------------------------------------------------------------
    def start(self) -> "ClockSampler":
        """Start sampling; where NVML cannot be read, sample nothing and say why in ``error``."""
        try:
            self._open()
        except RuntimeError as exc:
            self.error = str(exc)
            return self
        self._thread = threading.Thread(target=self._loop, name="gpu-clocks", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    def __enter__(self) -> "ClockSampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None

    # -- what was sampled -------------------------------------------------------------------------------------
    def add(self, sample: Sample) -> None:
        with self._lock:
            self.samples.append(sample)

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        """The samples taken between host times ``t0`` and ``t1`` (``time.time()``), summarised by device (keyed
        by its NVML index as text): ``samples``, ``sm_mhz`` and ``mem_mhz`` as [min, median, max], the median
        power in W, the highest temperature in C, and every clock-event reason seen with the share of samples it
        was active in. Empty where nothing was sampled (no NVML, or a window shorter than the interval)."""
        with self._lock:
            inside = [s for s in self.samples if t0 <= s.at <= t1]
        out: dict[str, Any] = {}
        for device in sorted({s.device for s in inside}):
            rows = [s for s in inside if s.device == device]
            seen: dict[str, int] = {}
            for s in rows:
                for name in reason_names(s.reasons or 0):
                    seen[name] = seen.get(name, 0) + 1
            out[str(device)] = {
                "samples": len(rows),
                "sm_mhz": _spread([s.sm_mhz for s in rows]),
                "mem_mhz": _spread([s.mem_mhz for s in rows]),
                "power_w": round(statistics.median(s.power_w for s in rows), 1),
                "temp_c_max": max(s.temp_c for s in rows),
                "reasons": {name: round(n / len(rows), 3) for name, n in sorted(seen.items())},
            }
        return out


def _spread(values: list[int]) -> list[float]:
    return [min(values), statistics.median(values), max(values)]
