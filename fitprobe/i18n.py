"""The language fitprobe speaks to people: English, Spanish, German or Simplified Chinese.

Machine output never changes with it: JSON, exit codes and the server's answers stay English. Only the
words a person reads do (terminal text, error lines, --help, the HTML report).

Choosing: `--lang en|es|de|zh` (before or after the command), else the first of LC_ALL, LC_MESSAGES, LANG
that is set (POSIX order): `de_DE.UTF-8` -> de, `zh_CN` -> zh, `C`, `POSIX` or anything else -> en.

API (stable; the HTML report uses it too):

- `SUPPORTED` = ("en", "es", "de", "zh"); `language()` -> the active one; `set_language(lang)`;
  `choose(flag, environ)` -> the language of a --lang value (UsageError if unsupported) or the environment.
- `translations(lang)` -> `gettext.NullTranslations` for `lang` (English: the null one, no file read);
  hand it to Jinja2: `env.install_gettext_translations(translations(lang), newstyle=True)`.
- `_(msgid)`, `ngettext(singular, plural, n)`: gettext bound to the active language. `N_(msgid)` marks a
  string for extraction only (translated later, e.g. click help texts).
- `say(text)`: a core sentence (`fitprobe.estimator.message.msg/plural`, a `Text`) in the active language,
  its numbers formatted for the locale; a plain string is looked up as a msgid and otherwise kept.
- Formatting for the active language (or `lang=`): `number(x, digits)` ("4.096,5"), `gib(nbytes, digits)`
  ("421,71 GiB"), `percent(fraction, digits)` ("83 %" in de), `date_text(d)`, `spec(value, ".2f")`
  (a Python format spec, localized). English uses Python's own formatting; Babel is imported only for
  es, de and zh, so an English run costs nothing extra.

Catalogs: `fitprobe/locale/<lang>/LC_MESSAGES/fitprobe.po` (source, from `fitprobe.pot`; docs/i18n.md).
The .mo files are not kept in git: the first use of a language compiles its .po with Babel into
`$FITPROBE_CACHE_DIR/locale/<lang>-<sha256 of the .po>/<lang>/LC_MESSAGES/fitprobe.mo` (a temporary folder, or
memory, if that cannot be written), so a clean clone and an edited .po both just work.

click's own words (Usage:, its errors): `with click_speaks(lang):` binds that .mo as the process's gettext text
domain, where click's stdlib gettext calls look (the command line does it around each run).
"""
from __future__ import annotations

import io
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # gettext itself is imported on first use, not at start-up
    import gettext

SUPPORTED = ("en", "es", "de", "zh")
DEFAULT = "en"
LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "fitprobe"
BABEL_LOCALE = {"en": "en", "es": "es", "de": "de", "zh": "zh_Hans"}  # formatting locale per language
ENV_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")

_active = DEFAULT


def language() -> str:
    return _active


def set_language(lang: str) -> None:
    global _active
    if lang not in SUPPORTED:
        raise ValueError(f"unsupported language {lang!r}")
    _active = lang


def from_locale_name(value: str) -> str:
    """'de_DE.UTF-8' -> 'de', 'zh_CN' -> 'zh', 'es' -> 'es'; 'C', 'POSIX' and the rest -> 'en'."""
    code = re.split(r"[_.@-]", value.strip(), maxsplit=1)[0].lower()
    return code if code in SUPPORTED else DEFAULT


def from_environment(environ=None) -> str:
    environ = os.environ if environ is None else environ
    for var in ENV_VARS:  # the first one set decides, as setlocale(LC_MESSAGES) does
        if environ.get(var):
            return from_locale_name(environ[var])
    return DEFAULT


def choose(flag: str | None = None, environ=None) -> str:
    """The language of a --lang value, else of the environment; an unsupported value is a UsageError."""
    if flag is None:
        return from_environment(environ)
    lang = flag.strip().lower()
    if lang not in SUPPORTED:
        from fitprobe.errors import UsageError
        from fitprobe.estimator.message import msg

        raise UsageError(msg("--lang %(lang)s is not supported: use one of %(choices)s",
                             lang=repr(flag), choices=", ".join(SUPPORTED)))
    return lang


@lru_cache(maxsize=None)
def translations(lang: str) -> gettext.NullTranslations:
    """The gettext catalog of `lang` (compiled from its .po on first use, then cached on disk)."""
    import gettext

    if lang == DEFAULT:
        return gettext.NullTranslations()
    if lang not in SUPPORTED:
        raise ValueError(f"unsupported language {lang!r}")
    folder = localedir(lang)
    if folder is None:  # nowhere to write the .mo: compiled in memory
        return gettext.GNUTranslations(io.BytesIO(compile_po(po_path(lang).read_bytes(), lang)))
    with open(folder / lang / "LC_MESSAGES" / f"{DOMAIN}.mo", "rb") as mo:
        return gettext.GNUTranslations(mo)


def po_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def localedir(lang: str) -> Path | None:
    """A gettext locale folder holding `<lang>/LC_MESSAGES/fitprobe.mo`, compiled from the .po on first use:
    `$FITPROBE_CACHE_DIR/locale/<lang>-<sha256 of the .po>/`, else a temporary folder removed at exit;
    None when neither can be written."""
    import hashlib

    raw = po_path(lang).read_bytes()
    name = f"{lang}-{hashlib.sha256(raw).hexdigest()[:16]}"
    from fitprobe.catalogs.validated import cache_dir

    data = None
    for base in (lambda: cache_dir() / "locale", _temporary_folder):
        try:
            folder = base() / name
            mo = folder / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"
            if mo.is_file():
                return folder
            data = data or compile_po(raw, lang)
            mo.parent.mkdir(parents=True, exist_ok=True)
            partial = mo.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(data)
            os.replace(partial, mo)
            return folder
        except OSError:  # a read-only cache: the next place
            continue
    return None


_temporary = None


def _temporary_folder() -> Path:
    global _temporary
    if _temporary is None:
        import tempfile

        _temporary = tempfile.TemporaryDirectory(prefix="fitprobe-locale-")  # removed when the process ends
    return Path(_temporary.name)


def compile_po(raw: bytes, lang: str) -> bytes:
    """A .po file's bytes as .mo bytes (Babel's read_po/write_mo; fuzzy entries left out)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    catalog = read_po(io.BytesIO(raw), locale=BABEL_LOCALE[lang], domain=DOMAIN)
    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()


class click_speaks:
    """`with click_speaks(lang):` click's own words (Usage:, Options:, "Show this message and exit.", its
    error messages) in `lang`, from fitprobe's catalogs (scripts/i18n.py extracts click's msgids into them).

    click marks its strings with the stdlib's `gettext.gettext`/`ngettext`, which look in the process's text
    domain for the language named by LANGUAGE, LC_ALL, LC_MESSAGES, LANG. For the block, fitprobe's domain
    is bound (`bindtextdomain`/`textdomain`, the compiled .mo of `localedir`) and LANGUAGE (the GNU variable
    that names the message language, read first) set to `lang`; both are restored afterwards. English binds
    nothing: click's text is the msgid. Only the command line does this: it owns the process."""

    def __init__(self, lang: str):
        self.lang = lang

    def __enter__(self) -> None:
        import gettext

        self.saved = gettext.textdomain(), os.environ.get("LANGUAGE")
        folder = None if self.lang == DEFAULT else localedir(self.lang)
        if folder is None:  # English, or no .mo could be written: click's own (English) text
            gettext.textdomain("messages")  # the stdlib's default domain
            self._language(self.saved[1])
            return
        gettext.bindtextdomain(DOMAIN, str(folder))
        gettext.textdomain(DOMAIN)
        self._language(self.lang)

    def __exit__(self, *exc) -> None:
        import gettext

        gettext.textdomain(self.saved[0])
        self._language(self.saved[1])

    @staticmethod
    def _language(value: str | None) -> None:
        if value is None:
            os.environ.pop("LANGUAGE", None)
        else:
            os.environ["LANGUAGE"] = value


def _(message: str) -> str:
    return message if _active == DEFAULT else translations(_active).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    if _active == DEFAULT:
        return singular if n == 1 else plural
    return translations(_active).ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Mark for extraction; translate where it is shown."""
    return message


SEPARATORS = (N_("; "), N_(" and "), N_(", "))  # the separators of fitprobe.estimator.message.join, translated by say()


def say(text) -> str:
    """`text` in the active language: a core `Text`/`Joined` rebuilt from its msgid, a plain string
    looked up as a msgid (kept as it is when the catalog lacks it)."""
    if _active == DEFAULT:
        return str(text)
    from fitprobe.estimator.message import Joined, Num, Text

    if isinstance(text, Joined):
        return _(text.separator).join(say(p) for p in text.parts)
    if not isinstance(text, Text):
        return _(str(text)) if text else str(text)
    args = {k: (spec(v.value, v.spec, v.unit) if isinstance(v, Num) else say(v) if isinstance(v, str)
                else number(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                else say(_message_of(v)) if isinstance(v, BaseException) else str(v))
            for k, v in text.args.items()}
    template = (ngettext(text.msgid, text.msgid_plural, text.n) if text.msgid_plural is not None
                else _(text.msgid))
    try:
        return template % args if args or "%" in template else template
    except (KeyError, ValueError, TypeError):  # a broken translation: the English sentence
        return str(text)


def _message_of(exc: BaseException) -> str:
    from fitprobe.errors import message_of

    return message_of(exc)


_SPEC = r"^(?P<group>,)?(?:\.(?P<digits>\d+))?(?P<kind>[dfg%]?)$"


def spec(value: float, fmt: str = "", unit: str = "", *, lang: str | None = None) -> str:
    """`format(value, fmt)` (+ ' unit') in the language's number style: ',' groups, '.N' decimals,
    'f' fixed, '%' percent, 'g'/'' shortest. Python's own formatting for English."""
    lang = lang or _active
    if lang == DEFAULT:
        text = format(value, fmt)
    else:
        m = re.match(_SPEC, fmt)
        if m is None:
            text = format(value, fmt)
        elif m["kind"] == "%":
            text = percent(value, int(m["digits"] or 0), lang=lang)
        elif m["kind"] in ("g", "") and m["digits"] is None:
            text = _babel_decimal(value, "#,##0.######" if m["group"] else "0.######", lang)
        else:
            digits = int(m["digits"] or 0)
            text = _babel_decimal(value, ("#,##0" if m["group"] else "0") + ("." + "0" * digits if digits else ""),
                                  lang)
    return f"{text} {unit}" if unit else text


def number(value: float, digits: int | None = None, *, group: bool = True, lang: str | None = None) -> str:
    """4096 -> '4,096' (en), '4.096' (de); `digits` fixed decimals, None: as many as the value has."""
    if isinstance(value, int) and digits is None:
        return spec(value, "," if group else "d", lang=lang)
    return spec(value, ("," if group else "") + (f".{digits}f" if digits is not None else "g"), lang=lang)


def gib(nbytes: float, digits: int = 2, *, unit: bool = True, lang: str | None = None) -> str:
    """Bytes as GiB: '421.71 GiB' (en), '421,71 GiB' (es, de)."""
    return spec(nbytes / (1 << 30), f",.{digits}f", "GiB" if unit else "", lang=lang)


def percent(fraction: float, digits: int = 0, *, lang: str | None = None) -> str:
    """0.83 -> '83%' (en), '83 %' (de, es), '83%' (zh)."""
    lang = lang or _active
    if lang == DEFAULT:
        return format(fraction, f".{digits}%")
    from babel.numbers import format_percent

    pattern = None if not digits else "#,##0." + "0" * digits + "%"
    # rounded as Python's '%' format rounds it, which multiplies the float by 100 first (0.225 -> '22%', where the
    # exact binary value, 0.22500000000000000555, would round to 23): the same digits in every language
    from decimal import Decimal

    rounded = Decimal(format(fraction * 100, f".{digits}f")) / 100 if isinstance(fraction, float) else fraction
    return format_percent(rounded, format=pattern, locale=BABEL_LOCALE[lang])


def date_text(day, *, lang: str | None = None) -> str:
    """A date (datetime.date) in the language's medium style: 'Dec 1, 2026', '01.12.2026', '2026年12月1日'."""
    lang = lang or _active
    if lang == DEFAULT:  # CLDR's English medium date, without Babel
        return f"{day:%b} {day.day}, {day.year}"
    from babel.dates import format_date

    return format_date(day, format="medium", locale=BABEL_LOCALE[lang])


def _babel_decimal(value: float, pattern: str, lang: str) -> str:
    from babel.numbers import format_decimal

    return format_decimal(_exact(value), format=pattern, locale=BABEL_LOCALE[lang])


def _exact(value: float):
    """The float's exact binary value, so Babel rounds it as Python's format() does (0.15 -> '0.1')."""
    from decimal import Decimal

    return Decimal(value) if isinstance(value, float) else value


def width(text: str) -> int:
    """Terminal columns of `text` (CJK characters take two), for aligning tables."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


_CJK_TOKEN = r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]|[^\s\u2e80-\u9fff\u3000-\u303f\uff00-\uffef]+|\s+"


def wrap(text: str, columns: int, initial_indent: str = "", subsequent_indent: str = "") -> list[str]:
    """textwrap.wrap by terminal columns: a CJK sentence breaks between characters, Latin text between words
    (never inside one, as textwrap with break_long_words=False and break_on_hyphens=False)."""
    if width(text) == len(text):
        import textwrap

        return textwrap.wrap(text, columns, initial_indent=initial_indent, subsequent_indent=subsequent_indent,
                             break_on_hyphens=False, break_long_words=False)
    lines, line = [], initial_indent
    for token in re.findall(_CJK_TOKEN, text):  # compiled on first use (re caches it): English never pays
        at_start = line.strip() == ""
        if token.isspace():  # kept inside a line (aligned columns), dropped where a line starts
            if not at_start:
                line += " " * len(token)
            continue
        if not at_start and width(line) + width(token) > columns:
            lines.append(line.rstrip())
            line = subsequent_indent
        line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines


def ljust(text: str, columns: int) -> str:
    return text + " " * max(0, columns - width(text))


def rjust(text: str, columns: int) -> str:
    return " " * max(0, columns - width(text)) + text
