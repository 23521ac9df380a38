"""Languages end to end: the choice (--lang, LC_ALL > LC_MESSAGES > LANG), the catalogs (every msgid of the
sources translated in es, de and zh, placeholders kept), locale formatting, and the rule that JSON and exit
codes never change with the language."""
import io
import json

import pytest
from babel.messages.pofile import read_po
from hypothesis import given
from hypothesis import strategies as st
from click.testing import CliRunner

from fitprobe import i18n
from fitprobe.cli import main
from fitprobe.estimator.message import gib, join, msg, plural
from scripthelpers import load_script

LANGS = ("en", "es", "de", "zh")


def _script():
    return load_script("i18n")


def run(*args, env=None):
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.output


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    i18n.set_language("en")


@pytest.mark.parametrize("value,lang", [("de_DE.UTF-8", "de"), ("zh_CN", "zh"), ("zh_CN.GB18030", "zh"),
                                        ("es_MX.utf8", "es"), ("es", "es"), ("en_US.UTF-8", "en"), ("C", "en"),
                                        ("POSIX", "en"), ("C.UTF-8", "en"), ("fr_FR.UTF-8", "en"), ("", "en")])
def test_locale_names(value, lang):
    assert i18n.from_locale_name(value) == lang


@pytest.mark.parametrize("environ,lang", [
    ({"LANG": "de_DE.UTF-8"}, "de"),
    ({"LANG": "de_DE.UTF-8", "LC_MESSAGES": "es_ES.UTF-8"}, "es"),
    ({"LANG": "de_DE.UTF-8", "LC_MESSAGES": "es_ES.UTF-8", "LC_ALL": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "de_DE.UTF-8", "LC_ALL": ""}, "de"),  # an empty variable is unset
    ({"LC_ALL": "C", "LANG": "de_DE.UTF-8"}, "en"),  # LC_ALL=C wins: English
    ({}, "en"),
])
def test_environment_precedence(environ, lang):
    assert i18n.from_environment(environ) == lang


def test_the_environment_and_lang_override_choose_the_cli_language():
    env = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": "de_DE.UTF-8"}
    code, out = run("plan", "nosuchmodel", "--gpu", "RTX 4090", env=env)
    assert code == 3 and "Fehler: " in out
    code, out = run("plan", "nosuchmodel", "--gpu", "RTX 4090", "--lang", "es", env=env)
    assert code == 3 and out.startswith("error: ") and "modelo" in out
    code, out = run("--lang=zh", "plan", "nosuchmodel", "--gpu", "RTX 4090", env=env)
    assert code == 3 and out.startswith("错误：")
    code, out = run("plan", "nosuchmodel", "--gpu", "RTX 4090", env={"LC_ALL": "zh_CN.UTF-8", "LANG": "de_DE.UTF-8"})
    assert out.startswith("错误：")


@pytest.mark.parametrize("args", [["--lang", "xx", "plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090"],
                                  ["plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--lang", "fr"],
                                  ["list", "gpus", "--lang=pt_BR"]])
def test_an_unsupported_language_is_a_usage_error(args):
    code, out = run(*args)
    assert code == 2 and out.count("\n") == 1 and "is not supported: use one of en, es, de, zh" in out


def test_every_msgid_is_translated_with_its_placeholders():
    """Extracts the msgids from the sources (and templates) now, so a new string without a translation
    in es, de or zh fails here; so does a translation that drops or renames a %(placeholder)s."""
    assert _script().problems() == []


def test_the_pot_is_current():
    """fitprobe.pot holds what the sources mark (scripts/i18n.py update regenerates it)."""
    script = _script()
    found = set()
    pot = read_po(io.BytesIO(script.POT.read_bytes()))
    for lang in LANGS:
        catalog = read_po(io.BytesIO(i18n.po_path(lang).read_bytes()), locale=lang)
        assert {m.id for m in pot if m.id} <= {m.id for m in catalog if m.id}, lang
    found = {m.id for m in pot if m.id}
    assert "error: %(message)s" in found


def test_catalogs_compile_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(tmp_path))
    i18n.translations.cache_clear()
    try:
        assert i18n.translations("de").gettext("error: %(message)s") == "Fehler: %(message)s"
        cached = list((tmp_path / "locale").glob("de-*/de/LC_MESSAGES/fitprobe.mo"))
        assert len(cached) == 1
        i18n.translations.cache_clear()
        cached[0].write_bytes(i18n.compile_po(i18n.po_path("es").read_bytes(), "es"))  # the cache is what is read
        assert i18n.translations("de").gettext("error: %(message)s") == "error: %(message)s"
    finally:
        i18n.translations.cache_clear()


def test_a_read_only_cache_still_translates(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FITPROBE_CACHE_DIR", str(blocker))  # not a directory: nothing can be written
    i18n.translations.cache_clear()
    try:
        assert i18n.translations("zh").gettext("error: %(message)s") == "错误：%(message)s"
    finally:
        i18n.translations.cache_clear()


@pytest.mark.parametrize("lang,gib_text,count,percent", [("en", "421.71 GiB", "4,096", "83%"),
                                                         ("es", "421,71 GiB", "4.096", "83 %"),
                                                         ("de", "421,71 GiB", "4.096", "83 %"),
                                                         ("zh", "421.71 GiB", "4,096", "83%")])
def test_locale_formats(lang, gib_text, count, percent):
    assert i18n.gib(421.71 * (1 << 30), lang=lang) == gib_text
    assert i18n.number(4096, lang=lang) == count
    assert i18n.percent(0.83, lang=lang).replace("\xa0", " ") == percent
    assert i18n.spec(12345.678, ",.1f", "tok/s", lang=lang).endswith(" tok/s")


@pytest.mark.parametrize("lang", ["en", "es", "de", "zh"])
def test_a_percent_rounds_to_the_same_digits_in_every_language(lang):
    """0.225 is 22.5 % once Python multiplies the float by 100, so English shows 22 %; the other languages must too
    (rounded from the float's exact binary value, 0.2250000000000000055, Babel had shown 23 %)."""
    assert i18n.percent(0.225, lang=lang).replace("\xa0", " ").rstrip("%").strip() == "22"
    assert i18n.percent(0.835, 1, lang=lang).replace(",", ".").startswith(format(0.835, ".1%")[:-1])


def test_core_sentences_are_english_for_json_and_translated_for_people():
    text = msg("%(where)s keeps %(margin)s free", where="RTX 4090", margin=gib(3.5 * (1 << 30)))
    assert text == "RTX 4090 keeps 3.50 GiB free" and json.dumps(text) == '"RTX 4090 keeps 3.50 GiB free"'
    assert isinstance(join([text, "x"]), str) and join([text, "x"]) == "RTX 4090 keeps 3.50 GiB free; x"
    i18n.set_language("de")
    assert i18n.say(text) == "RTX 4090 hat 3,50 GiB frei"
    assert i18n.say("not a msgid") == "not a msgid"
    seqs = plural("%(n)s concurrent sequence", "%(n)s concurrent sequences", 2)
    assert seqs == "2 concurrent sequences"


def _columns(text: str) -> int:
    return max(i18n.width(line) for line in text.splitlines())


PLAN = ["plan", "llama-3.3-70b-instruct", "--gpu", "RTX 4090", "--ram-gib", "32"]
SAYS = {  # what each language's plan page says (the same numbers, in its own words and number style)
    "en": ["Recommended: FITS — ~{tps} tok/s", "As asked (Q4_K_M, 8K context, f16 KV, 1 sequence, llama.cpp): DOES NOT FIT",
           "Memory (GiB)", "21.6 GiB in RAM", "What would make it fit as asked"],
    "es": ["Recomendado: CABE — ~{tps_comma} tok/s", "Como se pidió (Q4_K_M, contexto 8K, KV f16, 1 secuencia, llama.cpp): NO CABE",
           "Memoria (GiB)", "21,6 GiB en RAM", "Qué haría que quepa como se pidió", "RAM del sistema"],
    "de": ["Empfohlen: PASST — ~{tps_comma} tok/s", "Wie angefragt (Q4_K_M, 8K Kontext, f16-KV, 1 Sequenz, llama.cpp): PASST NICHT",
           "Speicher (GiB)", "21,6 GiB im RAM", "Was es wie angefragt passend machen würde", "System-RAM"],
    "zh": ["推荐：可运行 — ~{tps} tok/s", "按要求（Q4_K_M，上下文 8K，f16 KV，1 个序列，llama.cpp）：放不下",
           "内存（GiB）", "内存中 21.6 GiB", "怎样按要求放下", "系统内存"],
}


@pytest.mark.parametrize("lang", LANGS)
def test_plan_page_in_each_language(lang):
    code, out = run(*PLAN, "--lang", lang)
    assert code == 0
    tps = f"{json.loads(run(*PLAN, '--json')[1])['recommended']['decode_tps']:.1f}"  # the speed model's figure
    for phrase in SAYS[lang]:
        phrase = phrase.format(tps=tps, tps_comma=tps.replace(".", ","))
        assert phrase in out, (lang, phrase)
    assert "$ llama-server -m llama-3.3-70b-instruct-Q4_K_M.gguf --ctx-size 8192" in out  # commands stay commands
    assert _columns(out) <= 100  # wrapped by terminal columns, CJK counted double
    if lang != "en":
        english = run(*PLAN)[1]
        assert "Recommended" not in out and "does not fit" not in out.lower().replace("passt nicht", "")
        assert out != english


@pytest.mark.parametrize("lang,title,runs", [("es", "Qué se ejecuta en RTX 4090", "corre"),
                                             ("de", "Was auf RTX 4090 läuft", "läuft"),
                                             ("zh", "RTX 4090 上能运行什么", "运行")])
def test_fit_in_each_language(lang, title, runs):
    code, out = run("fit", "--gpu", "RTX 4090", "--limit", "3", "--lang", lang)
    assert code == 0 and out.startswith(title) and runs in out.splitlines()[1]
    assert _columns(out) <= 100


@pytest.mark.parametrize("lang,text", [("en", "error: unknown model 'nosuch'"),
                                       ("es", "error: modelo desconocido 'nosuch'"),
                                       ("de", "Fehler: unbekanntes Modell 'nosuch'"),
                                       ("zh", "错误：未知模型 'nosuch'")])
def test_errors_in_each_language(lang, text):
    code, out = run("plan", "nosuch", "--gpu", "RTX 4090", "--lang", lang)
    assert code == 3 and out.startswith(text) and out.count("\n") == 1
    code, out = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4091", "--lang", lang)
    assert code == 2 and "RTX 4090" in out


@pytest.mark.parametrize("lang,summary", [("es", "Dimensiona MODEL en el hardware indicado"),
                                          ("de", "Berechnet MODEL auf benannter Hardware"),
                                          ("zh", "在指定硬件上估算 MODEL")])
def test_help_summaries_in_each_language(lang, summary):
    code, out = run("--lang", lang, "--help")
    assert code == 0 and summary[:20] in out.replace("\n  ", " ")
    code, out = run("plan", "--help", "--lang", lang)
    assert code == 0 and summary in " ".join(out.split())
    assert "Size MODEL on named hardware" in " ".join(run("plan", "--help")[1].split())  # the msgids are kept


JSON_RUNS = [
    ["plan", "llama-3.3-70b-instruct", "--gpu", "RTX 4090", "--ram-gib", "32", "--json"],
    ["plan", "deepseek-v3", "--gpu", "RTX 3060 12GB", "--json", "--require-tps", "5", "--min-margin", "1GiB"],
    ["plan", "qwen3-30b-a3b", "--gpu", "H100 SXM", "--gpus", "2", "--engine", "vllm", "--json", "--ctx", "1M"],
    ["fit", "--gpu", "RTX 4090", "--limit", "4", "--json"],
    ["plan", "nosuch", "--gpu", "RTX 4090", "--json"],
    ["list", "gpus", "--json"],
    ["report", "deepseek-v3", "--gpu", "RTX 3060 12GB", "--json"],
    ["plan", "x", "--gpu", "RTX 4090", "--gpus", "abc", "--json"],  # click's usage errors: English in the JSON
    ["plan", "x", "--gpu", "RTX 4090", "--nope", "--json"],
    ["plan", "x", "--gpu", "RTX 4090", "--min-margin", "5x", "--json"],
    ["plan", "--json"],
    ["list", "quants", "--json"],  # catalog labels: translated on screen, the catalog's English in the JSON
    ["report", "--gpu", "RTX 4090", "--json"],
]


@pytest.mark.parametrize("args", JSON_RUNS)
def test_json_and_exit_codes_do_not_change_with_the_language(args):
    """The machine contract is English whatever the reader's language: byte-identical stdout and the same
    exit code for en, es, de and zh (chosen by --lang and by the environment)."""
    runner = CliRunner()
    results = [runner.invoke(main, [*args, "--lang", lang]) for lang in LANGS]
    results.append(runner.invoke(main, args, env={"LC_ALL": "de_DE.UTF-8"}))
    assert len({r.exit_code for r in results}) == 1
    assert len({r.stdout for r in results}) == 1, [r.stdout[:200] for r in results]
    json.loads(results[0].stdout.splitlines()[0] if results[0].exit_code in (2, 3) else results[0].stdout)


def test_say_rebuilds_joined_and_plural_sentences():
    i18n.set_language("es")
    seqs = plural("%(n)s concurrent sequence, as sized", "%(n)s concurrent sequences, as sized", 1)
    assert seqs == "1 concurrent sequence, as sized" and i18n.say(seqs) == "1 secuencia simultánea, como se dimensionó"
    many = plural("%(n)s concurrent sequence, as sized", "%(n)s concurrent sequences, as sized", 4096)
    assert i18n.say(many) == "4.096 secuencias simultáneas, como se dimensionó"
    both = join([msg("fp8 KV: halves the cache, so fewer weights have to be offloaded"), "x"], " and ")
    assert i18n.say(both).startswith("KV fp8: reduce la caché a la mitad") and i18n.say(both).endswith(" y x")
    i18n.set_language("zh")
    assert i18n.wrap("模型在 GPU 上放不下" * 12, 40, "  ", "    ")[1].startswith("    ")
    assert all(i18n.width(line) <= 40 for line in i18n.wrap("模型在 GPU 上放不下" * 12, 40, "  ", "    "))


@given(value=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), digits=st.integers(0, 4),
       group=st.booleans())
def test_german_numbers_are_the_english_ones_with_swapped_separators(value, digits, group):
    """Locale formatting changes the separators, never the digits: de '1.234,5' is en '1,234.5'."""
    fmt = ("," if group else "") + f".{digits}f"
    english = i18n.spec(value, fmt, lang="en")
    german = i18n.spec(value, fmt, lang="de")
    assert german.translate(str.maketrans(".,", ",.")) == english.replace("-0,", "0,") or \
        german.translate(str.maketrans(".,", ",.")) == english


@given(n=st.integers(0, 10**7), gib_bytes=st.integers(0, 1 << 50))
def test_core_sentences_say_exactly_the_english_text_in_english(n, gib_bytes):
    text = msg("%(where)s keeps %(margin)s free", where=str(n), margin=gib(gib_bytes))
    assert i18n.say(text) == str(text) == f"{n} keeps {gib_bytes / (1 << 30):.2f} GiB free"


def test_dates_in_each_language():
    import datetime

    day = datetime.date(2026, 12, 1)
    assert [i18n.date_text(day, lang=lang) for lang in LANGS] == ["Dec 1, 2026", "1 dic 2026", "01.12.2026",
                                                                  "2026年12月1日"]


CLICK_SAYS = {  # click's own words (its help page, its usage errors) through fitprobe's catalogs
    "en": ["Usage: main plan", "Options:", "Show this message and exit.", "[required]", "[default: 1;"],
    "es": ["Uso: main plan", "Opciones:", "Muestra esta ayuda y termina.", "[obligatorio]", "[predeterminado: 1;"],
    "de": ["Aufruf: main plan", "Optionen:", "Zeigt diese Hilfe an und beendet das Programm.", "[erforderlich]",
           "[Standard: 1;"],
    "zh": ["用法: main plan", "选项:", "显示此帮助并退出。", "[必填]", "[默认：1;"],
}
CLICK_ERRORS = {  # (arguments, what the one line says) per language; every one exits 2 (usage)
    "en": [(["--gpus", "abc"], "Invalid value for '--gpus': 'abc' is not a valid integer range."),
           (["--nope"], "No such option '--nope'."), ([], "Missing argument 'MODEL'."),
           (["--engine", "foo"], "'foo' is not one of 'llama.cpp'"), (["--min-margin", "5x"], "'5x' is not a size"),
           (["--ctx", "lots"], "'lots' is not a context"), (["--gpu-util", "2"], "2 is not in (0, 1]")],
    "es": [(["--gpus", "abc"], "Valor no válido para '--gpus': 'abc' no es un número válido."),
           (["--nope"], "No existe la opción '--nope'."), ([], "Falta el argumento 'MODEL'."),
           (["--engine", "foo"], "'foo' no es ninguno de estos: 'llama.cpp'"),
           (["--min-margin", "5x"], "'5x' no es un tamaño"), (["--ctx", "lots"], "'lots' no es un contexto"),
           (["--gpu-util", "2"], "2 no está en (0, 1]")],
    "de": [(["--gpus", "abc"], "Ungültiger Wert für '--gpus': 'abc' ist keine gültige Zahl."),
           (["--nope"], "Unbekannte Option '--nope'. Meinten Sie '--token'?"), ([], "Fehlendes Argument 'MODEL'."),
           (["--engine", "foo"], "'foo' ist keiner dieser Werte: 'llama.cpp'"),
           (["--min-margin", "5x"], "'5x' ist keine Größe wie 2GiB"), (["--ctx", "lots"], "'lots' ist kein Kontext"),
           (["--gpu-util", "2"], "2 liegt nicht in (0, 1]")],
    "zh": [(["--gpus", "abc"], "'--gpus' 的值无效：'abc' 不是有效的数字。"), (["--nope"], "没有选项 '--nope'。"),
           ([], "缺少参数 'MODEL'"), (["--engine", "foo"], "'foo' 不在可选值"), (["--min-margin", "5x"], "'5x' 不是"),
           (["--ctx", "lots"], "'lots' 不是上下文长度"), (["--gpu-util", "2"], "2 不在 (0, 1] 内")],
}


@pytest.mark.parametrize("lang", LANGS)
def test_click_help_page_in_each_language(lang):
    code, out = run("--lang", lang, "plan", "--help")
    assert code == 0
    for phrase in CLICK_SAYS[lang]:
        assert phrase in " ".join(out.split()), (lang, phrase)
    code, out = run("--lang", lang, "--help")
    assert code == 0 and {"es": "Comandos:", "de": "Befehle:", "zh": "命令:", "en": "Commands:"}[lang] in out
    code, out = run("--version", "--lang", lang)
    assert code == 0 and out == {"en": "fitprobe, version ", "es": "fitprobe, versión ", "de": "fitprobe, Version ",
                                 "zh": "fitprobe，版本 "}[lang] + __import__("fitprobe").__version__ + "\n"


@pytest.mark.parametrize("lang", LANGS)
def test_click_usage_errors_in_each_language_exit_2(lang):
    for args, says in CLICK_ERRORS[lang]:
        code, out = run("--lang", lang, "plan", *(["x", "--gpu", "RTX 4090"] if args else []), *args)
        assert code == 2 and out.count("\n") == 1, (args, out)
        assert says in out, (lang, args, out)
        if lang != "en":
            assert "Invalid value" not in out and "No such option" not in out and "Missing argument" not in out


def test_click_speaks_only_inside_the_command():
    """The language, and the text domain and LANGUAGE fitprobe sets for click, are restored when the command ends."""
    import gettext
    import os

    before = gettext.textdomain(), os.environ.get("LANGUAGE")
    run("--lang", "de", "plan", "--help")
    run("--lang", "zh", "plan", "x", "--gpu", "RTX 4090", "--gpus", "abc")
    assert (gettext.textdomain(), os.environ.get("LANGUAGE")) == before
    assert gettext.gettext("Usage:") == "Usage:" and i18n.language() == "en"  # the language was the run's


def test_a_new_click_msgid_shows_up_as_untranslated(monkeypatch):
    """click's msgids are extracted from the installed click: one a click upgrade adds fails the check."""
    script = _script()
    assert {"Usage:", "Show this message and exit.", "No such option {name!r}.", "required"} <= set(script.click_messages())
    real = script.click_messages
    monkeypatch.setattr(script, "click_messages", lambda: {**real(), "Aborted by a newer click!": None})
    assert script.problems() == [f"{lang}: missing 'Aborted by a newer click!'" for lang in LANGS]


CJK_NEXT_TO_ASCII_SEPARATOR = r"[\u4e00-\u9fff\uff09][,;] |[,;] [\u4e00-\u9fff]"


def test_chinese_pages_use_chinese_separators_and_words():
    """The attention summary, the recommended hardware and the speed line: Chinese words and ，；（） in zh."""
    import re

    code, plan = run("plan", "llama-3.1-8b-instruct", "--gpu", "RTX 4090", "--full", "--lang", "zh")
    assert code == 0 and "GQA：32 层全注意力" in plan and "（瓶颈：GPU 带宽）" in plan
    code, report = run("report", "llama-3.1-70b-instruct", "--gpu", "RTX 4090", "--gpus", "2", "--ram-gib", "64",
                       "--lang", "zh")
    assert code == 0 and "（二手价）" in report and "[llama.cpp，可运行]" in report
    for text in (plan, report):
        assert not re.findall(CJK_NEXT_TO_ASCII_SEPARATOR, text)


@pytest.mark.parametrize("lang,attention", [("en", "GQA: 10 full, 52 sliding-window (1024)"),
                                            ("es", "GQA: 10 completas, 52 de ventana deslizante (1024)"),
                                            ("de", "GQA: 10 mit voller Attention, 52 mit gleitendem Fenster (1024)"),
                                            ("zh", "GQA：10 层全注意力，52 层滑动窗口（1024）")])
def test_attention_summary_in_each_language(lang, attention):
    code, out = run("plan", "gemma-3-27b-it", "--gpu", "RTX 4090", "--lang", lang)
    assert code == 0 and attention in " ".join(out.split())
    data = json.loads(run("plan", "gemma-3-27b-it", "--gpu", "RTX 4090", "--json", "--lang", lang)[1])
    assert data["model"]["attention"] == "GQA: 10 full, 52 sliding-window (1024)"


@pytest.mark.parametrize("lang,label", [("en", "GGUF Q4_K_M (4-bit, recommended)"), ("es", "GGUF Q4_K_M (4 bits, recomendado)"),
                                        ("de", "GGUF Q4_K_M (4 Bit, empfohlen)"), ("zh", "GGUF Q4_K_M（4 位，推荐）")])
def test_catalog_labels_are_translated_where_shown(lang, label):
    """Catalog data stays data: the label is looked up at display time, the JSON keeps the catalog's text."""
    code, out = run("list", "quants", "--lang", lang)
    assert code == 0 and label in out
    rows = json.loads(run("list", "quants", "--json", "--lang", lang)[1])
    assert {"name": "Q4_K_M", "kind": "gguf", "label": "GGUF Q4_K_M (4-bit, recommended)"} in rows


def test_probe_reasons_and_simulate_words_follow_the_language():
    from fitprobe.probe.run import run_command
    from fitprobe.simulate import sample_tokens

    reason = run_command(["/nonexistent/fitprobe-tool"]).reason
    assert reason == "/nonexistent/fitprobe-tool not found"
    i18n.set_language("de")
    assert i18n.say(reason) == "/nonexistent/fitprobe-tool nicht gefunden"
    assert sample_tokens()[0][:4] == ["Die", "kurze", "Antwort", "lautet"] and sample_tokens()[1] == " "
    i18n.set_language("zh")
    assert i18n.say(reason) == "未找到 /nonexistent/fitprobe-tool"
    tokens, between = sample_tokens()
    assert between == "" and tokens[:4] == ["简", "单", "地", "说"] and all(len(t) == 1 for t in tokens)
