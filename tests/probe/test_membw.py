"""probe --bench's memory-bandwidth reading: the arithmetic with a scripted clock, and a real short run."""
import pytest

from fitprobe.probe.membw import measure_copy_bandwidth


def test_bandwidth_is_read_plus_write_bytes_over_the_best_round():
    ticks = iter([0.0,  # start
                  0.0, 5.0,  # warm-up round (ignored)
                  5.0, 5.1, 5.1,  # round 1: 0.1 s, then the budget check
                  5.1, 5.15, 5.15,  # round 2: 0.05 s (best)
                  5.15, 5.25, 5.25])  # round 3

    def clock():
        return next(ticks)

    gbs, method = measure_copy_bandwidth(threads=2, mib_per_thread=1, rounds=3, budget_s=1e9, clock=clock)
    assert gbs == pytest.approx(2 * 2 * (1 << 20) / 0.05 / 1e9, rel=1e-3)
    assert "2 threads" in method and "best of 3" in method


def test_a_real_short_measurement_is_positive():
    gbs, _ = measure_copy_bandwidth(threads=1, mib_per_thread=8, rounds=1, budget_s=2)
    assert gbs > 0.1


def test_probe_bench_advises_the_peak_that_reproduces_the_measured_rate():
    """--ram-bw is a peak that the speed model multiplies by η_cpu; a measured copy rate is already an achieved
    rate, so `probe --bench` advises copy / η_cpu: planning with it streams the measured rate, not η × it."""
    import re

    from click.testing import CliRunner

    from fitprobe.catalogs.speed_calibration import load_calibration
    from fitprobe.cli import main

    res = CliRunner().invoke(main, ["probe", "--bench"])
    assert res.exit_code == 0, res.output
    measured = float(re.search(r"RAM bandwidth: ([0-9.]+) GB/s measured", res.output)[1])
    advised = float(re.search(r"pass --ram-bw ([0-9]+)", res.output)[1])
    assert advised == pytest.approx(measured / load_calibration().cpu.bandwidth, abs=0.5)
