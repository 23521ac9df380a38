"""Translation catalogs: extract the msgids, update the .po files, compile, check (docs/i18n.md).

    python scripts/i18n.py extract   # fitprobe/locale/fitprobe.pot from the sources and templates (babel.cfg),
                                     # plus click's own msgids from the installed click (Usage:, its errors)
    python scripts/i18n.py update    # extract, then merge the .pot into every fitprobe/locale/<lang>/.../fitprobe.po
    python scripts/i18n.py compile   # .mo files next to the .po (optional: fitprobe compiles on first use)
    python scripts/i18n.py check     # every msgid translated in every language, placeholders kept; exit 1 if not

The same as `pybabel extract -F babel.cfg -k msg -k plural:1,2 ...`, with the keywords written down once.
"""
from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "fitprobe" / "locale"
POT = LOCALE / "fitprobe.pot"
LANGS = ("en", "es", "de", "zh")
KEYWORDS = ("msg", "plural:1,2", "_", "N_", "ngettext:1,2", "gettext")  # fitprobe.estimator.message, fitprobe.i18n
PLACEHOLDER = re.compile(r"%\((\w+)\)[-#0 +]*\d*(?:\.\d+)?[sdifgeEFGxXor%]|%%")
BRACE = re.compile(r"\{(\w+)(?:![rsa])?(?::[^{}]*)?\}")  # click's msgids: str.format fields
CLICK_KEYWORDS = {"_": None, "ngettext": (1, 2)}  # click: `from gettext import gettext as _, ngettext`
CLICK_COMMENT = "click's own text"
CLICK_DYNAMIC = ("required",)
# Catalog data a person reads, translated where it is shown (the catalogs stay data; the JSON keeps the English):
# (file under catalogs/data, list key, fields)
DATA_LABELS = (("quant_formats.json", "formats", ("label",)), ("gpus.json", "devices", ("price_basis", "used_price_basis")))  # passed to gettext through a variable (core.py: `_(extra["required"])`)
# click fills {number_type} with its English type name ("integer range"): a translation may leave it out
ENGLISH_ONLY_FIELDS = {"number_type"}


def pybabel(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "babel.messages.frontend", *args], cwd=ROOT, check=True)


def extract() -> None:
    keywords = [a for k in KEYWORDS for a in ("-k", k)]
    pybabel("extract", "-F", "babel.cfg", "--no-default-keywords", *keywords, "--sort-output", "--no-location",
            "--project", "fitprobe", "-w", "100", "-c", "TRANSLATORS:", "-o", str(POT.relative_to(ROOT)), ".")
    add_click_messages()


def click_messages() -> dict:
    """click's msgids (msgid -> plural msgid or None) from the click this interpreter imports: fitprobe routes
    them through its catalogs (fitprobe.i18n.click_speaks), so a click upgrade's new strings show up here as
    untranslated instead of staying English."""
    from pathlib import Path as _Path

    import click
    from babel.messages.extract import extract_from_dir

    found: dict = {}
    for _file, _line, message, _comments, _ctx in extract_from_dir(_Path(click.__file__).parent, [("**.py", "python")],
                                                                   keywords=CLICK_KEYWORDS):
        msgid, msgid_plural = message if isinstance(message, tuple) else (message, None)
        found.setdefault(msgid, msgid_plural)
    return found | dict.fromkeys(CLICK_DYNAMIC)


def data_messages() -> dict:
    """The labels of DATA_LABELS (msgid -> None), from the catalogs' JSON files."""
    import json

    found: dict = {}
    for name, key, fields in DATA_LABELS:
        entries = json.loads((ROOT / "catalogs" / "data" / name).read_text())[key]
        found.update(dict.fromkeys(e[f] for e in entries for f in fields if e.get(f)))
    return found


def add_click_messages() -> None:
    """Merge click's msgids and the catalogs' labels into the freshly extracted .pot (with a comment)."""
    from babel.messages.pofile import read_po, write_po

    with POT.open("rb") as fh:
        pot = read_po(fh)
    for msgid in data_messages():
        pot.add(msgid, auto_comments=["catalog data (catalogs/data): translated where it is shown"])
    for msgid, msgid_plural in click_messages().items():
        flags = ["python-brace-format"] if BRACE.search(msgid) else []
        if PLACEHOLDER.search(msgid):
            flags.append("python-format")
        pot.add(msgid if msgid_plural is None else (msgid, msgid_plural), auto_comments=[CLICK_COMMENT],
                flags=flags)
    with POT.open("wb") as fh:
        write_po(fh, pot, width=100, sort_output=True, omit_header=False)


def update() -> None:
    extract()
    for lang in LANGS:
        po = LOCALE / lang / "LC_MESSAGES" / "fitprobe.po"
        verb = "update" if po.exists() else "init"
        pybabel(verb, "-i", str(POT.relative_to(ROOT)), "-d", str(LOCALE.relative_to(ROOT)), "-D", "fitprobe",
                "-l", lang, "-w", "100", *(["--no-fuzzy-matching", "--ignore-obsolete"] if verb == "update" else []))


def compile_all() -> None:
    pybabel("compile", "-d", str(LOCALE.relative_to(ROOT)), "-D", "fitprobe")


def placeholders(text: str) -> list[str]:
    """The %(name)s placeholders of a msgid or translation, and the {name} fields of click's."""
    return sorted([m.group(0) for m in PLACEHOLDER.finditer(text) if m.group(0) != "%%"]
                  + ["{%s}" % m.group(1) for m in BRACE.finditer(text)])


def problems() -> list[str]:
    """What a release must not have: a msgid of the sources missing or untranslated in a catalog, or a
    translation whose placeholders differ from its msgid's."""
    from babel.messages.extract import extract_from_dir
    from babel.messages.pofile import read_po

    keywords = {}
    for k in KEYWORDS:
        name, _, spec = k.partition(":")
        keywords[name] = tuple(int(i) for i in spec.split(",")) if spec else None
    method_map = [(f"{folder}/**.py", "python") for folder in ("fitprobe", "estimator", "probe", "catalogs")]
    method_map.insert(0, ("fitprobe/templates/**.html", "jinja2"))  # babel.cfg's mapping
    options = {"fitprobe/templates/**.html": {"extensions": "jinja2.ext.i18n"}}
    found: dict[str, str | None] = {}
    for _path, _line, message, _comments, _ctx in extract_from_dir(ROOT, method_map, options, keywords=keywords):
        if isinstance(message, tuple):
            found[message[0]] = message[1]
        else:
            found[message] = None
    found.update(click_messages())
    found.update(data_messages())
    optional = {"{%s}" % f for f in ENGLISH_ONLY_FIELDS}
    out = []
    for lang in LANGS:
        catalog = read_po(io.BytesIO((LOCALE / lang / "LC_MESSAGES" / "fitprobe.po").read_bytes()), locale=lang)
        for msgid, msgid_plural in sorted(found.items()):
            entry = catalog.get(msgid)
            if entry is None or entry.fuzzy:
                out.append(f"{lang}: missing {msgid!r}")
                continue
            strings = entry.string if isinstance(entry.string, (tuple, list)) else (entry.string,)
            if lang == "en" and not any(strings):
                continue  # English: the msgid itself
            if not all(strings):
                out.append(f"{lang}: untranslated {msgid!r}")
                continue
            want = set(placeholders(msgid)) | set(placeholders(msgid_plural or ""))
            for text in strings:  # a plural form may leave the count out ("one sequence")
                have = set(placeholders(text))
                if not (have <= want if msgid_plural is not None else want - optional <= have <= want):
                    out.append(f"{lang}: placeholders {sorted(have)} differ from {sorted(want)} in {msgid!r}")
    return out


if __name__ == "__main__":
    verb = sys.argv[1] if len(sys.argv) > 1 else "check"
    if verb == "check":
        found = problems()
        print("\n".join(found) or "every msgid is translated in " + ", ".join(LANGS))
        sys.exit(1 if found else 0)
    {"extract": extract, "update": update, "compile": compile_all}[verb]()
