"""Thermal readings: Linux on fake sysfs trees, macOS with the system calls stood in, the sampler, the gate."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engine.measure.thermal import (
    ThermalReading,
    ThermalSampler,
    ThermalState,
    parse_pmset_therm,
    read_linux,
    read_macos,
    wait_until_cool,
)

# A sampler that fails to stop would otherwise hang until the suite-wide timeout.
pytestmark = pytest.mark.timeout(30)

NOMINAL, FAIR, SERIOUS, CRITICAL, UNKNOWN = (
    ThermalState.NOMINAL,
    ThermalState.FAIR,
    ThermalState.SERIOUS,
    ThermalState.CRITICAL,
    ThermalState.UNKNOWN,
)


def add_zone(root: Path, index: int, temp: str, kind: str = "x86_pkg_temp", trips: tuple = ()) -> Path:
    """A thermal_zone folder; `temp` and trip temperatures are written as given (millidegrees)."""
    zone = root / "sys/class/thermal" / f"thermal_zone{index}"
    zone.mkdir(parents=True)
    (zone / "temp").write_text(temp + "\n")
    (zone / "type").write_text(kind + "\n")
    for n, (trip_kind, trip_temp) in enumerate(trips):
        (zone / f"trip_point_{n}_type").write_text(trip_kind + "\n")
        (zone / f"trip_point_{n}_temp").write_text(trip_temp + "\n")
    return zone


def add_cpu(root: Path, index: int, cur: str | None, scaling_max: str | None, cpuinfo_max: str | None) -> None:
    cpufreq = root / "sys/devices/system/cpu" / f"cpu{index}" / "cpufreq"
    cpufreq.mkdir(parents=True)
    for name, value in (
        ("scaling_cur_freq", cur),
        ("scaling_max_freq", scaling_max),
        ("cpuinfo_max_freq", cpuinfo_max),
    ):
        if value is not None:
            (cpufreq / name).write_text(value + "\n")


ACPI_TRIPS = (("active", "60000"), ("passive", "95000"), ("critical", "105000"))


# --- Linux ---------------------------------------------------------------------------------------------------------


def test_no_thermal_folder_is_unknown_said_plainly(tmp_path):
    reading = read_linux(tmp_path)
    assert reading.state is UNKNOWN
    assert reading.temperature_c is None and reading.cpu_speed_limit is None
    assert reading.describe() == (
        "unknown: no thermal zones under /sys/class/thermal and no cpufreq (usual in containers and VMs)"
    )


def test_empty_thermal_folder_is_unknown(tmp_path):
    (tmp_path / "sys/class/thermal").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/cpu0").mkdir(parents=True)  # a VM: CPUs but no cpufreq
    assert read_linux(tmp_path).state is UNKNOWN


@pytest.mark.parametrize(
    ("millidegrees", "state"),
    [
        ("84999", NOMINAL),  # active trip at 60 passed: fans only, still nominal
        ("85000", FAIR),  # 10 °C below the passive trip
        ("94999", FAIR),
        ("95000", SERIOUS),  # at the passive trip
        ("104999", SERIOUS),
        ("105000", CRITICAL),  # at the critical trip
    ],
)
def test_trip_points_set_the_state(tmp_path, millidegrees, state):
    add_zone(tmp_path, 0, millidegrees, "acpitz", ACPI_TRIPS)
    reading = read_linux(tmp_path)
    assert reading.state is state
    assert reading.temperature_c == int(millidegrees) / 1000
    assert reading.source == "/sys/class/thermal: 1 zone, hottest acpitz, trip points"


def test_hot_trip_counts_like_passive(tmp_path):
    add_zone(tmp_path, 0, "72000", "soc", (("hot", "80000"),))
    assert read_linux(tmp_path).state is FAIR


@pytest.mark.parametrize(
    ("millidegrees", "state"),
    [("79999", NOMINAL), ("80000", FAIR), ("90000", SERIOUS), ("99999", SERIOUS), ("100000", CRITICAL)],
)
def test_zones_without_trips_use_fixed_thresholds_and_say_so(tmp_path, millidegrees, state):
    add_zone(tmp_path, 0, millidegrees)
    reading = read_linux(tmp_path)
    assert reading.state is state
    assert (
        reading.source
        == "/sys/class/thermal: 1 zone, hottest x86_pkg_temp, no trip points, so fixed 80/90/100 °C thresholds"
    )


def test_unset_trips_at_zero_are_ignored(tmp_path):
    # x86_pkg_temp lists passive trips at 0 when none is set; taken at face value it would read SERIOUS.
    add_zone(tmp_path, 0, "45000", trips=(("passive", "0"), ("passive", "0")))
    reading = read_linux(tmp_path)
    assert reading.state is NOMINAL
    assert reading.source.endswith("no trip points, so fixed 80/90/100 °C thresholds")


def test_hottest_zone_gives_the_temperature_and_worst_zone_the_state(tmp_path):
    add_zone(tmp_path, 0, "61000", "x86_pkg_temp")  # fixed scale: nominal, but the hottest
    add_zone(tmp_path, 1, "55500", "soc", (("passive", "60000"),))  # within 10 °C of its trip: fair
    add_zone(tmp_path, 2, "30000", "acpitz", ACPI_TRIPS)
    reading = read_linux(tmp_path)
    assert reading.temperature_c == 61.0
    assert reading.state is FAIR
    assert reading.source == (
        "/sys/class/thermal: 3 zones, hottest x86_pkg_temp, trip points where given, else fixed 80/90/100 °C"
    )
    assert reading.describe() == f"fair, 61 °C ({reading.source})"


def test_unreadable_and_garbage_files_are_skipped(tmp_path):
    add_zone(tmp_path, 0, "not a number")
    add_zone(tmp_path, 1, "")
    add_zone(tmp_path, 2, "-273200")  # a sensor reporting absolute zero is broken, not cold
    zone3 = add_zone(tmp_path, 3, "99000", "acpitz")
    (zone3 / "temp").unlink()
    (zone3 / "temp").mkdir()  # reading it raises, as sysfs does for a sensor that is off (even for root)
    (add_zone(tmp_path, 4, "47000", "x86_pkg_temp") / "type").write_bytes(b"\xff\xfe\n")  # not text
    add_zone(tmp_path, 5, "42000", "acpitz", (("passive", "garbage"), ("critical", "105000")))
    (tmp_path / "sys/class/thermal/thermal_zone6").mkdir()  # no files at all
    (tmp_path / "sys/class/thermal/cooling_device0").mkdir()  # not a zone
    reading = read_linux(tmp_path)
    assert reading.temperature_c == 47.0
    assert reading.state is NOMINAL
    # zone 4's unreadable type falls back to its folder name; zone 5 keeps its critical trip
    assert reading.source == (
        "/sys/class/thermal: 2 zones, hottest thermal_zone4, trip points where given, else fixed 80/90/100 °C"
    )


def test_cpufreq_gives_the_fastest_cpus_fraction_of_its_maximum(tmp_path):
    add_zone(tmp_path, 0, "52000")
    add_cpu(tmp_path, 0, "1200000", "2400000", "2400000")
    add_cpu(tmp_path, 1, "1800000", "2400000", "2400000")
    add_cpu(tmp_path, 2, "800000", "2400000", "2400000")
    reading = read_linux(tmp_path)
    assert reading.cpu_speed_limit == 0.75
    # a slow idle CPU is power saving, not heat: the state stays nominal
    assert reading.state is NOMINAL
    assert reading.describe() == (
        "nominal, 52 °C, CPU at 75% speed (/sys/class/thermal: 1 zone, hottest x86_pkg_temp, "
        "no trip points, so fixed 80/90/100 °C thresholds; cpufreq: 3 CPUs)"
    )


def test_cpufreq_falls_back_to_scaling_max_and_caps_turbo_at_one(tmp_path):
    add_cpu(tmp_path, 0, "1000000", "4000000", None)
    assert read_linux(tmp_path).cpu_speed_limit == 0.25
    add_cpu(tmp_path, 1, "2401000", "2400000", "2400000")  # acpi-cpufreq can report turbo above the maximum
    assert read_linux(tmp_path).cpu_speed_limit == 1.0


def test_a_lowered_policy_cap_is_fair_at_most(tmp_path):
    add_zone(tmp_path, 0, "52000")
    add_cpu(tmp_path, 0, "1400000", "1400000", "2800000")
    reading = read_linux(tmp_path)
    assert reading.state is FAIR
    assert reading.cpu_speed_limit == 0.5
    assert reading.source.endswith("; cpufreq: 1 CPU, capped at 50%")


def test_cpufreq_without_zones_is_unknown_but_reports_speed(tmp_path):
    add_cpu(tmp_path, 0, "600000", "3000000", "3000000")
    add_cpu(tmp_path, 1, "garbage", "3000000", "3000000")
    add_cpu(tmp_path, 2, "900000", None, None)  # no maximum: cannot make a fraction
    reading = read_linux(tmp_path)
    assert reading.state is UNKNOWN
    assert reading.cpu_speed_limit == 0.2
    assert reading.describe() == "unknown, CPU at 20% speed (cpufreq: 1 CPU; no temperature sensors)"


# --- macOS ---------------------------------------------------------------------------------------------------------

PMSET_INTEL_THROTTLED = """\
Note: No thermal warning level has been recorded
Note: No performance warning level has been recorded
2024-07-29 10:32:19 -0700 CPU Power notify
\tCPU_Scheduler_Limit \t= 100
\tCPU_Available_CPUs \t= 8
\tCPU_Speed_Limit \t= 72
"""
PMSET_INTEL_FULL = PMSET_INTEL_THROTTLED.replace("= 72", "= 100")
PMSET_APPLE_SILICON = """\
Note: No thermal warning level has been recorded
Note: No performance warning level has been recorded
Note: No CPU power status has been recorded
"""
PMSET_SCHEDULER_ONLY = "2024-07-29 10:32:19 -0700 CPU Power notify\n\tCPU_Scheduler_Limit \t= 100\n"


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (PMSET_INTEL_THROTTLED, 0.72),
        (PMSET_INTEL_FULL, 1.0),
        (PMSET_APPLE_SILICON, None),
        (PMSET_SCHEDULER_ONLY, None),
        (PMSET_INTEL_THROTTLED + "2024-07-29 10:33:00 -0700 CPU Power notify\n\tCPU_Speed_Limit \t= 55\n", 0.55),
        ("CPU_Speed_Limit = 100\n", 1.0),
        ("CPU_Speed_Limit = 250\n", None),  # not a percentage
        ("", None),
    ],
)
def test_pmset_parsing(text, limit):
    assert parse_pmset_therm(text) == limit


@pytest.mark.parametrize(("raw", "state"), [(0, NOMINAL), (1, FAIR), (2, SERIOUS), (3, CRITICAL)])
def test_macos_thermal_state_mapping(raw, state):
    reading = read_macos(lambda: raw, lambda: PMSET_INTEL_FULL)
    assert reading.state is state
    assert reading.cpu_speed_limit == 1.0
    assert reading.temperature_c is None
    assert reading.describe() == f"{state.value}, CPU at 100% speed (NSProcessInfo.thermalState, pmset -g therm)"


def test_macos_on_apple_silicon_has_no_speed_limit():
    reading = read_macos(lambda: 0, lambda: PMSET_APPLE_SILICON)
    assert reading.cpu_speed_limit is None
    assert reading.describe() == "nominal (NSProcessInfo.thermalState, pmset -g therm gave no CPU speed limit)"


def test_macos_failing_call_is_unknown():
    def no_pyobjc() -> int:
        raise ModuleNotFoundError("No module named 'Foundation'")

    reading = read_macos(no_pyobjc, lambda: None)
    assert reading.state is UNKNOWN
    assert reading.describe() == (
        "unknown: NSProcessInfo.thermalState unavailable (No module named 'Foundation'), "
        "pmset -g therm gave no CPU speed limit"
    )


def test_macos_unexpected_value_is_unknown():
    assert read_macos(lambda: 7, lambda: PMSET_INTEL_THROTTLED).state is UNKNOWN


# --- the sampler ---------------------------------------------------------------------------------------------------


class CountingProvider:
    """Readings numbered by their timestamp, so their order can be checked."""

    def __init__(self, state: ThermalState = NOMINAL) -> None:
        self.calls = 0
        self.state = state

    def __call__(self) -> ThermalReading:
        self.calls += 1
        return ThermalReading(self.state, "fake", temperature_c=50.0, timestamp=float(self.calls))


def wait_for(event: threading.Event) -> None:
    assert event.wait(5), "the sampler delivered nothing"


def test_sampler_delivers_readings_and_keeps_bounded_history():
    provider = CountingProvider()
    got: list[ThermalReading] = []
    enough = threading.Event()

    def collect(reading: ThermalReading) -> None:
        got.append(reading)
        if len(got) >= 5:
            enough.set()

    sampler = ThermalSampler(interval=0.01, provider=provider, history_size=3)
    assert sampler.latest is None and sampler.history == ()
    sampler.subscribe(collect)
    sampler.start()
    wait_for(enough)
    sampler.stop()
    assert [r.timestamp for r in got] == [float(i) for i in range(1, len(got) + 1)]
    history = sampler.history
    assert len(history) == 3
    assert [r.timestamp for r in history] == [
        float(provider.calls - 2),
        float(provider.calls - 1),
        float(provider.calls),
    ]
    assert sampler.latest == history[-1]


def test_a_raising_callback_does_not_kill_the_sampler():
    seen = threading.Event()
    calls = {"bad": 0}

    def bad(_: ThermalReading) -> None:
        calls["bad"] += 1
        raise RuntimeError("boom")

    def good(_: ThermalReading) -> None:
        if calls["bad"] >= 3:
            seen.set()

    with ThermalSampler(interval=0.01, provider=CountingProvider()) as sampler:
        sampler.subscribe(bad)
        sampler.subscribe(good)
        wait_for(seen)
        assert sampler.running


def test_a_raising_provider_gives_unknown_readings():
    def broken() -> ThermalReading:
        raise OSError("sensor gone")

    sampler = ThermalSampler(interval=0.01, provider=broken)
    reading = sampler.sample_once()
    assert reading.state is UNKNOWN
    assert reading.describe() == "unknown: the thermal provider failed: sensor gone"


def test_unsubscribe_stops_delivery():
    sampler = ThermalSampler(interval=0.01, provider=CountingProvider())
    got: list[ThermalReading] = []
    unsubscribe = sampler.subscribe(got.append)
    sampler.sample_once()
    unsubscribe()
    unsubscribe()  # twice is harmless
    sampler.sample_once()
    assert len(got) == 1
    assert len(sampler.history) == 2


def test_stop_returns_promptly_and_double_start_stop_is_harmless():
    sampler = ThermalSampler(interval=3600.0, provider=CountingProvider())  # stop must not wait out the interval
    sampler.stop()  # before start: harmless
    first = threading.Event()
    sampler.subscribe(lambda _: first.set())
    sampler.start()
    thread = sampler._thread
    sampler.start()
    assert sampler._thread is thread  # no second thread
    wait_for(first)
    sampler.stop()
    assert thread is not None and not thread.is_alive()
    assert not sampler.running
    sampler.stop()
    assert len(sampler.history) == 1  # one sample at start, then the long wait was cut short


def test_sampler_restarts_after_stop():
    provider = CountingProvider()
    sampled = threading.Semaphore(0)
    sampler = ThermalSampler(interval=3600.0, provider=provider)
    sampler.subscribe(lambda _: sampled.release())
    sampler.start()
    assert sampled.acquire(timeout=5)
    sampler.stop()
    sampler.start()
    assert sampled.acquire(timeout=5)
    sampler.stop()
    assert provider.calls == 2


def test_stop_from_a_callback_does_not_deadlock():
    sampler = ThermalSampler(interval=0.01, provider=CountingProvider())
    threads: list[threading.Thread] = []

    def stop_from_inside(_: ThermalReading) -> None:
        threads.append(threading.current_thread())
        sampler.stop()

    sampler.subscribe(stop_from_inside)
    sampler.start()
    sampler_thread = sampler._thread
    if sampler_thread is not None:
        sampler_thread.join(5)
    assert len(threads) == 1
    threads[0].join(5)
    assert not threads[0].is_alive()
    assert threads[0] is not threading.current_thread()
    assert len(sampler.history) == 1
    assert not sampler.running


def test_a_thread_stopped_from_its_callback_is_not_revived_by_the_next_start():
    stopped_inside = threading.Event()
    release = threading.Event()
    old: list[threading.Thread] = []
    sampler = ThermalSampler(interval=0.01, provider=CountingProvider())

    def stop_first_time(_: ThermalReading) -> None:
        if not old:
            old.append(threading.current_thread())
            sampler.stop()
            stopped_inside.set()
            release.wait(5)  # still finishing while the next start() happens

    sampler.subscribe(stop_first_time)
    sampler.start()
    wait_for(stopped_inside)
    sampler.start()
    release.set()
    old[0].join(5)
    assert not old[0].is_alive()
    assert sampler.running
    sampler.stop()


# --- the cool-down gate --------------------------------------------------------------------------------------------


def test_wait_until_cool_returns_at_once_when_nominal():
    provider = CountingProvider(NOMINAL)
    reading, waited = wait_until_cool(timeout_s=10.0, poll_s=5.0, fixed_pause_s=5.0, provider=provider)
    assert reading.state is NOMINAL
    assert provider.calls == 1
    assert waited < 5.0  # it did not sleep a poll or a pause


def test_wait_until_cool_waits_the_fixed_pause_when_unknown():
    provider = CountingProvider(UNKNOWN)
    reading, waited = wait_until_cool(timeout_s=10.0, poll_s=5.0, fixed_pause_s=0.05, provider=provider)
    assert reading.state is UNKNOWN
    assert provider.calls == 1
    assert 0.05 <= waited < 5.0


def test_wait_until_cool_waits_for_the_state_to_drop():
    states = iter([SERIOUS, FAIR, NOMINAL])
    calls: list[ThermalState] = []

    def cooling() -> ThermalReading:
        calls.append(next(states))
        return ThermalReading(calls[-1], "fake")

    reading, waited = wait_until_cool(timeout_s=10.0, poll_s=0.01, provider=cooling)
    assert reading.state is NOMINAL
    assert calls == [SERIOUS, FAIR, NOMINAL]
    assert waited >= 0.02


def test_wait_until_cool_gives_up_at_the_timeout():
    provider = CountingProvider(SERIOUS)
    reading, waited = wait_until_cool(timeout_s=0.05, poll_s=0.01, fixed_pause_s=5.0, provider=provider)
    assert reading.state is SERIOUS
    assert waited >= 0.05
    assert provider.calls >= 2
