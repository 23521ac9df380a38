"""Sentences the core says, kept translatable without the core knowing about languages.

`msg("%(where)s keeps %(margin)s free", where=name, margin=Num(n / GIB, ".2f", "GiB"))` is a `str`: the
English sentence, exactly what the JSON contract carries. It also remembers its msgid and arguments,
so an edge (`fitprobe.i18n.say`) can look the msgid up in a gettext catalog and format the arguments
for a locale ("421,71 GiB"). `plural(...)` does the same for ngettext. The msgids use python-format
placeholders (`%(name)s`), as gettext and Jinja2's i18n extension do; `pybabel extract` finds them by
the keywords `msg` and `plural:1,2` (babel.cfg / scripts/i18n.py).
"""
from __future__ import annotations


class Num:
    """A number to show with a Python format spec (",", ".2f", ",.1f", "g", ".0%") and an optional unit
    (GiB, tok/s, ms) that stays untranslated; an edge re-formats it for the reader's locale."""

    __slots__ = ("value", "spec", "unit")

    def __init__(self, value: float, spec: str = "", unit: str = ""):
        self.value, self.spec, self.unit = value, spec, unit

    def __str__(self) -> str:
        text = format(self.value, self.spec)
        return f"{text} {self.unit}" if self.unit else text


def gib(n: float, digits: int = 2) -> Num:
    """Bytes as GiB with `digits` decimals and the unit: '12.34 GiB'."""
    return Num(n / (1 << 30), f".{digits}f", "GiB")


class Text(str):
    """English text plus the msgid (and plural msgid, count) and arguments it was made from."""

    def __new__(cls, msgid: str, args: dict, msgid_plural: str | None = None, n: int | None = None):
        source = msgid if msgid_plural is None or n == 1 else msgid_plural
        text = super().__new__(cls, source % {k: str(v) for k, v in args.items()} if args or "%" in source
                               else source)
        text.msgid, text.msgid_plural, text.n, text.args = msgid, msgid_plural, n, args
        return text

    def __reduce__(self):  # copies and pickles keep the structure
        return (Text, (self.msgid, self.args, self.msgid_plural, self.n))


def msg(msgid: str, **args) -> Text:
    """A translatable sentence; `args` are strings (said as they are), `Num`s or other `Text`s."""
    return Text(msgid, args)


def plural(singular: str, plural_: str, n: int, **args) -> Text:
    """A translatable sentence whose wording depends on `n` (also available as %(n)s)."""
    return Text(singular, {"n": n, **args}, plural_, n)


class Joined(str):
    """A string of several `Text`s (or plain strings) joined by a separator."""

    def __new__(cls, separator: str, parts: list):
        text = super().__new__(cls, separator.join(parts))
        text.separator, text.parts = separator, parts
        return text

    def __reduce__(self):
        return (Joined, (self.separator, self.parts))


def join(parts, separator: str = "; ") -> Joined:
    """Sentences joined for the JSON (English); `fitprobe.i18n.say` translates each part."""
    return Joined(separator, list(parts))
