"""The live speed simulator: timing with an injected clock (no sleeping), the CLI summary line for
non-TTY / NO_COLOR. The HTML page's simulator runs in Chromium: tests/report/test_report_page.py."""
import json
import re

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from fitprobe.cli import main
from fitprobe.simulate import Playback, play, sample_tokens, summary


class FakeClock:
    """A clock that moves only when the player sleeps."""

    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, s):
        assert s >= 0
        self.slept.append(s)
        self.now += s


def test_tokens_appear_at_ttft_plus_steps():
    pb = Playback.plan(500.0, 40.0, 10, max_seconds=30)
    assert pb.speedup == 1 and pb.real_seconds == pytest.approx(0.5 + 10 / 40)
    assert [pb.token_time(i) for i in (0, 9)] == pytest.approx([0.5 + 1 / 40, 0.5 + 10 / 40])
    clock, out, times = FakeClock(), [], []

    def write(text):
        out.append(text)
        if not text.startswith(("\r", "\n")):
            times.append(clock.now)

    play(pb, write=write, sleep=clock.sleep, clock=clock, color=False)
    text = "".join(out)
    assert "first token after 0.50 s" in text and " ".join(sample_tokens()[0][:10]) in text
    assert times == pytest.approx([pb.token_time(i) for i in range(10)])
    assert clock.now == pytest.approx(pb.real_seconds)
    assert "\x1b[" not in text.replace("\x1b[K", "")  # no colour codes without color


def test_slow_plans_play_faster_and_say_so():
    pb = Playback.plan(60_000.0, 2.0, 100, max_seconds=20)  # a CPU plan: 1 min wait + 50 s of tokens
    assert pb.speedup == pytest.approx(110 / 20)
    clock, out = FakeClock(), []
    play(pb, write=out.append, sleep=clock.sleep, clock=clock, color=True)
    assert clock.now == pytest.approx(20)
    assert "shown 5.5× faster" in "".join(out) and "\x1b[1m" in "".join(out)


@given(ttft=st.floats(0, 1e6), tps=st.floats(0.01, 1e5), n=st.integers(1, 5000), cap=st.floats(1, 600))
def test_playback_never_exceeds_the_cap_and_keeps_order(ttft, tps, n, cap):
    pb = Playback.plan(ttft, tps, n, cap)
    assert pb.token_time(n - 1) <= cap * (1 + 1e-9) or pb.speedup == 1
    assert pb.first_token_at <= pb.token_time(0) <= pb.token_time(n - 1)


def test_bad_speed_is_rejected():
    with pytest.raises(ValueError):
        Playback.plan(10, 0, 10, 30)


def test_cli_prints_one_summary_line_off_a_tty():
    result = CliRunner().invoke(main, ["simulate", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--tokens", "50"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "\x1b[" not in result.output
    m = re.search(r"first token after ([\d.]+) s \(4,096-token prompt\), then ([\d.]+) tok/s: 50 tokens in ([\d.]+) s",
                  lines[0])
    assert m, lines[0]
    ttft, tps, total = map(float, m.groups())
    assert total == pytest.approx(ttft + 50 / tps, abs=0.02)
    plan = json.loads(CliRunner().invoke(main, ["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--json"]).output)
    assert tps == pytest.approx(plan["speed"]["decode_tps"], abs=0.06)


def test_cli_bad_input_is_one_line():
    result = CliRunner().invoke(main, ["simulate", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--tokens", "0"])
    assert result.exit_code == 2 and "--tokens" in result.output and "Traceback" not in result.output
