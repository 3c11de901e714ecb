"""How hot the machine is, read the same way on every platform, plus a 1 Hz sampler and a cool-down gate.

`read_thermal().describe()` gives a line such as "nominal, 52 °C, CPU at 100% speed (pmset -g therm)".
"""

from __future__ import annotations

import enum
import logging
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


class ThermalState(enum.Enum):
    """Apple's four thermal states, which every platform is mapped onto, plus UNKNOWN."""

    NOMINAL = "nominal"
    FAIR = "fair"
    SERIOUS = "serious"
    CRITICAL = "critical"
    UNKNOWN = "unknown"


_SEVERITY = (ThermalState.NOMINAL, ThermalState.FAIR, ThermalState.SERIOUS, ThermalState.CRITICAL)


@dataclass(frozen=True, slots=True)
class ThermalReading:
    """One look at the machine's thermal state."""

    state: ThermalState
    source: str  # what was read, in words; for UNKNOWN with nothing read, why nothing could be
    temperature_c: float | None = None  # the hottest sensor; macOS gives none without root
    # Fraction 0..1. macOS: the speed cap macOS imposes (pmset's CPU_Speed_Limit / 100).
    # Linux: the fastest CPU's current frequency over its maximum.
    cpu_speed_limit: float | None = None
    timestamp: float = field(default_factory=time.monotonic)  # time.monotonic() seconds, for charts

    def describe(self) -> str:
        """One short line for a person, e.g. "nominal, 52 °C, CPU at 100% speed (pmset -g therm)"."""
        parts = [self.state.value]
        if self.temperature_c is not None:
            parts.append(f"{self.temperature_c:.0f} °C")
        if self.cpu_speed_limit is not None:
            parts.append(f"CPU at {self.cpu_speed_limit * 100:.0f}% speed")
        if len(parts) == 1 and self.state is ThermalState.UNKNOWN:
            return f"unknown: {self.source}"
        return f"{', '.join(parts)} ({self.source})"


Provider = Callable[[], ThermalReading]


def _worst(states: list[ThermalState]) -> ThermalState:
    return max(states, key=_SEVERITY.index) if states else ThermalState.UNKNOWN


# ---------------------------------------------------------------------------------------------------------------------
# Linux: /sys/class/thermal and cpufreq

# Used where a zone has no trip points: laptop and desktop CPUs throttle from about 90-100 °C.
FIXED_FAIR_C = 80.0
FIXED_SERIOUS_C = 90.0
FIXED_CRITICAL_C = 100.0
# How close to a passive or hot trip counts as FAIR: the kernel starts throttling at the trip itself.
TRIP_MARGIN_C = 10.0
# A policy cap (scaling_max_freq) below this fraction of the hardware maximum counts as throttling.
CAPPED_BELOW = 0.8
# Sensors and trips outside this range are broken or unset (x86_pkg_temp lists passive trips at 0), not hot.
_PLAUSIBLE_C = (-50.0, 200.0)


@dataclass(frozen=True, slots=True)
class _Zone:
    name: str
    temperature_c: float
    throttle_c: float | None  # the lowest passive or hot trip
    critical_c: float | None  # the lowest critical trip

    @property
    def has_trips(self) -> bool:
        return self.throttle_c is not None or self.critical_c is not None

    def state(self) -> ThermalState:
        if self.throttle_c is not None:
            fair_at, serious_at = self.throttle_c - TRIP_MARGIN_C, self.throttle_c
        else:
            fair_at, serious_at = FIXED_FAIR_C, FIXED_SERIOUS_C
        critical_at = self.critical_c
        # Without any trip the fixed scale applies whole; with a throttle trip but no critical one there is no
        # critical level, since a fixed 100 °C could sit below the zone's own throttle point.
        if not self.has_trips:
            critical_at = FIXED_CRITICAL_C
        t = self.temperature_c
        if critical_at is not None and t >= critical_at:
            return ThermalState.CRITICAL
        if t >= serious_at:
            return ThermalState.SERIOUS
        if t >= fair_at:
            return ThermalState.FAIR
        return ThermalState.NOMINAL


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):  # sysfs answers EINVAL or ENODATA for sensors that are off
        return None


def _read_number(path: Path) -> float | None:
    text = _read_text(path)
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _read_celsius(path: Path) -> float | None:
    millidegrees = _read_number(path)
    if millidegrees is None:
        return None
    celsius = millidegrees / 1000.0
    return celsius if _PLAUSIBLE_C[0] < celsius < _PLAUSIBLE_C[1] else None


def _glob(folder: Path, pattern: str) -> list[Path]:
    try:
        return sorted(folder.glob(pattern))
    except OSError:
        return []


def _read_zone(folder: Path) -> _Zone | None:
    temperature = _read_celsius(folder / "temp")
    if temperature is None:
        return None
    throttle: list[float] = []
    critical: list[float] = []
    for temp_file in _glob(folder, "trip_point_*_temp"):
        kind = _read_text(folder / temp_file.name.replace("_temp", "_type"))
        trip = _read_celsius(temp_file)
        if trip is None or trip <= 0:
            continue
        # Active trips only switch fans on, which is normal work, so they do not raise the state.
        if kind in ("passive", "hot"):
            throttle.append(trip)
        elif kind == "critical":
            critical.append(trip)
    name = _read_text(folder / "type") or folder.name
    return _Zone(name, temperature, min(throttle, default=None), min(critical, default=None))


def _read_cpufreq(root: Path) -> tuple[float | None, float | None, int]:
    """(fastest CPU's current/max frequency, lowest policy cap as a fraction of max, CPUs read)."""
    speeds: list[float] = []
    caps: list[float] = []
    for cpufreq in _glob(root / "sys/devices/system/cpu", "cpu[0-9]*/cpufreq"):
        hardware_max = _read_number(cpufreq / "cpuinfo_max_freq")
        policy_max = _read_number(cpufreq / "scaling_max_freq")
        current = _read_number(cpufreq / "scaling_cur_freq")
        top = hardware_max or policy_max
        if current is not None and top:
            speeds.append(min(current / top, 1.0))  # turbo can read above the listed maximum
        if hardware_max and policy_max is not None:
            caps.append(min(policy_max / hardware_max, 1.0))
    return max(speeds, default=None), min(caps, default=None), len(speeds)


def read_linux(root: str | Path = "/") -> ThermalReading:
    """Read thermal zones and cpufreq under `root` (a fake sysfs tree in tests)."""
    root = Path(root)
    zones = [z for z in map(_read_zone, _glob(root / "sys/class/thermal", "thermal_zone*")) if z is not None]
    speed, cap, cpus = _read_cpufreq(root)
    # An idle CPU runs slow to save power, so a low current frequency says nothing about heat. Only a lowered
    # policy cap (what the kernel's cpufreq cooling sets) counts, and it can be a power profile too: at most FAIR.
    capped = cap is not None and cap < CAPPED_BELOW
    parts = []
    if zones:
        hottest = max(zones, key=lambda z: z.temperature_c)
        with_trips = sum(z.has_trips for z in zones)
        if with_trips == len(zones):
            how = "trip points"
        elif with_trips:
            how = "trip points where given, else fixed 80/90/100 °C"
        else:
            how = "no trip points, so fixed 80/90/100 °C thresholds"
        plural = "s" if len(zones) > 1 else ""
        parts.append(f"/sys/class/thermal: {len(zones)} zone{plural}, hottest {hottest.name}, {how}")
    if cpus:
        parts.append(f"cpufreq: {cpus} CPU{'s' if cpus > 1 else ''}" + (f", capped at {cap:.0%}" if capped else ""))
    if not parts:
        return ThermalReading(
            ThermalState.UNKNOWN,
            "no thermal zones under /sys/class/thermal and no cpufreq (usual in containers and VMs)",
        )
    states = [z.state() for z in zones] + ([ThermalState.FAIR] if capped else [])
    if not zones and not capped:
        parts.append("no temperature sensors")
    return ThermalReading(
        _worst(states),
        "; ".join(parts),
        temperature_c=max((z.temperature_c for z in zones), default=None),
        cpu_speed_limit=speed,
    )


# ---------------------------------------------------------------------------------------------------------------------
# macOS: NSProcessInfo.thermalState and pmset

_MACOS_STATES = {0: ThermalState.NOMINAL, 1: ThermalState.FAIR, 2: ThermalState.SERIOUS, 3: ThermalState.CRITICAL}
_SPEED_LIMIT = re.compile(r"^\s*CPU_Speed_Limit\s*=\s*(\d+)\s*$", re.MULTILINE)


def ns_thermal_state() -> int:
    """NSProcessInfo's thermalState (0..3). The one PyObjC call; PyObjC is a darwin-only dependency."""
    from Foundation import NSProcessInfo  # imported here: PyObjC exists only on macOS

    return int(NSProcessInfo.processInfo().thermalState())


def pmset_therm_output() -> str | None:
    """The text of `pmset -g therm`, or None where it cannot be run."""
    try:
        done = subprocess.run(["pmset", "-g", "therm"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_pmset_therm(text: str) -> float | None:
    """CPU_Speed_Limit from `pmset -g therm` as a fraction; None where absent (Apple silicon never lists it)."""
    found = _SPEED_LIMIT.findall(text)
    if not found:
        return None
    percent = int(found[-1])  # the last notification is the current one
    return percent / 100 if 0 <= percent <= 100 else None


def read_macos(
    thermal_state: Callable[[], int] | None = None, pmset_output: Callable[[], str | None] | None = None
) -> ThermalReading:
    """Read macOS's thermal state and CPU speed limit; tests pass stand-ins for the two system calls."""
    thermal_state = thermal_state or ns_thermal_state
    pmset_output = pmset_output or pmset_therm_output
    parts = []
    try:
        raw = thermal_state()
        state = _MACOS_STATES.get(raw, ThermalState.UNKNOWN)
        parts.append("NSProcessInfo.thermalState" if raw in _MACOS_STATES else f"NSProcessInfo.thermalState={raw}?")
    except Exception as exc:  # no PyObjC, or Foundation refused: the state is unknown, not an error
        state = ThermalState.UNKNOWN
        parts.append(f"NSProcessInfo.thermalState unavailable ({exc})")
    text = pmset_output()
    speed = parse_pmset_therm(text) if text is not None else None
    parts.append("pmset -g therm" if speed is not None else "pmset -g therm gave no CPU speed limit")
    return ThermalReading(state, ", ".join(parts), cpu_speed_limit=speed)


# ---------------------------------------------------------------------------------------------------------------------
# Any platform


def read_thermal() -> ThermalReading:
    """Read this platform's thermal state; UNKNOWN, said plainly, where it reports none."""
    if sys.platform == "darwin":
        return read_macos()
    if sys.platform.startswith("linux"):
        return read_linux()
    return ThermalReading(ThermalState.UNKNOWN, f"this platform ({sys.platform}) reports no thermal state")


class ThermalSampler:
    """Reads the thermal state every `interval` seconds on a daemon thread and keeps the last `history_size`.

    Callbacks run on the sampler thread, not the caller's: a GUI must marshal them to its own thread.
    """

    def __init__(self, interval: float = 1.0, provider: Provider | None = None, history_size: int = 600) -> None:
        self.interval = interval
        self._provider = provider or read_thermal
        self._history: deque[ThermalReading] = deque(maxlen=history_size)
        self._subscribers: list[Callable[[ThermalReading], None]] = []
        self._lock = threading.Lock()
        # One stop event per thread: a thread told to stop from its own callback may still be finishing when
        # start() makes the next one, and must not be revived by it.
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, callback: Callable[[ThermalReading], None]) -> Callable[[], None]:
        """Call `callback(reading)` after every sample; returns a function that unsubscribes it."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    @property
    def latest(self) -> ThermalReading | None:
        """The newest reading, or None before the first."""
        with self._lock:
            return self._history[-1] if self._history else None

    @property
    def history(self) -> tuple[ThermalReading, ...]:
        """The kept readings, oldest first (a copy: the thread keeps appending)."""
        with self._lock:
            return tuple(self._history)

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start sampling at once; harmless when already running."""
        if self.running:
            return
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stopping,), name="thermal-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and join the thread; harmless when not running."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        # A callback may call stop() from the sampler thread itself, which cannot join itself.
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> ThermalSampler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def sample_once(self) -> ThermalReading:
        """Take one reading, keep it and hand it to the subscribers."""
        try:
            reading = self._provider()
        except Exception as exc:  # a broken provider must not end the sampling
            reading = ThermalReading(ThermalState.UNKNOWN, f"the thermal provider failed: {exc}")
        with self._lock:
            self._history.append(reading)
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(reading)
            except Exception:
                log.exception("a thermal subscriber raised; it stays subscribed")
        return reading

    def _run(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            started = time.monotonic()
            self.sample_once()
            stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))


def wait_until_cool(
    timeout_s: float, poll_s: float = 1.0, fixed_pause_s: float = 2.0, provider: Provider | None = None
) -> tuple[ThermalReading, float]:
    """Wait until the state is NOMINAL, at most `timeout_s`; returns (the last reading, seconds waited).

    Where the state is UNKNOWN nothing can be watched, so it waits `fixed_pause_s` (within the timeout) instead.
    """
    provider = provider or read_thermal
    started = time.monotonic()
    while True:
        reading = provider()
        waited = time.monotonic() - started
        remaining = timeout_s - waited
        if reading.state is ThermalState.NOMINAL or remaining <= 0:
            return reading, waited
        if reading.state is ThermalState.UNKNOWN:
            time.sleep(min(fixed_pause_s, remaining))
            return reading, time.monotonic() - started
        time.sleep(min(poll_s, remaining))
