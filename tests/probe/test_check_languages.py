"""`check` and `probe` on a probed GPU (the stand-in pynvml with the recorded H200 values) in each language:
the words change, the JSON and exit codes do not."""
import sys

import pytest
from click.testing import CliRunner
from fake_pynvml import FakeNVML
from test_probe_nvml import H200

from fitprobe import i18n
from fitprobe.cli import main
from fitprobe.probe.types import MiB

BUSY = {**H200, "memory": {**H200["memory"], "used": 130_000 * MiB, "free": 13_158 * MiB}}
SAYS = {"en": ("Right now: DOES NOT FIT", "What fits right now:", "probed: "),
        "es": ("Ahora mismo: NO CABE", "Lo que cabe ahora mismo:", "detectado: "),
        "de": ("Jetzt gerade: PASST NICHT", "Was jetzt gerade passt:", "erkannt: "),
        "zh": ("当前：放不下", "当前可运行：", "探测结果：")}
PROBE_SAYS = {"en": "RAM: ", "es": "RAM: ", "de": "RAM: ", "zh": "内存："}


@pytest.fixture(autouse=True)
def busy_h200(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([BUSY]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield
    i18n.set_language("en")


@pytest.mark.parametrize("lang", SAYS)
def test_check_right_now_in_each_language(lang):
    result = CliRunner().invoke(main, ["check", "qwen3-30b-a3b", "--ram-gib", "256", "--lang", lang])
    assert result.exit_code == 1, result.output  # gated on right now: the recommended command does not fit now
    for phrase in SAYS[lang]:
        assert phrase in result.output, (lang, phrase)
    if lang in ("es", "de"):
        assert "140,4 GiB" in result.output  # the H200's 143771 MiB, with a decimal comma


@pytest.mark.parametrize("lang", SAYS)
def test_probe_text_in_each_language(lang):
    result = CliRunner().invoke(main, ["probe", "--lang", lang])
    assert "H200" in result.output and PROBE_SAYS[lang] in result.output


def test_check_and_probe_json_are_the_same_in_every_language():
    for args in (["check", "qwen3-30b-a3b", "--ram-gib", "256", "--json"], ["probe", "--json"]):
        results = [CliRunner().invoke(main, [*args, "--lang", lang]) for lang in SAYS]
        assert len({r.exit_code for r in results}) == 1
        live = ("ram_available", "elapsed")  # this machine's RAM moves between runs; the rest must not
        stable = [[line for line in r.stdout.splitlines() if not any(k in line for k in live)] for r in results]
        assert all(s == stable[0] for s in stable), args
