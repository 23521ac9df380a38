"""Translation catalogs: extract the msgids, update the .po files, compile, check (docs/i18n.md).

    python scripts/i18n.py extract   # fitprobe/locale/fitprobe.pot from the sources and templates (babel.cfg)
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


def pybabel(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "babel.messages.frontend", *args], cwd=ROOT, check=True)


def extract() -> None:
    keywords = [a for k in KEYWORDS for a in ("-k", k)]
    pybabel("extract", "-F", "babel.cfg", "--no-default-keywords", *keywords, "--sort-output", "--no-location",
            "--project", "fitprobe", "-w", "100", "-c", "TRANSLATORS:", "-o", str(POT.relative_to(ROOT)), ".")


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
    return sorted(m.group(0) for m in PLACEHOLDER.finditer(text) if m.group(0) != "%%")


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
                if not (have <= want if msgid_plural is not None else have == want):
                    out.append(f"{lang}: placeholders {sorted(have)} differ from {sorted(want)} in {msgid!r}")
    return out


if __name__ == "__main__":
    verb = sys.argv[1] if len(sys.argv) > 1 else "check"
    if verb == "check":
        found = problems()
        print("\n".join(found) or "every msgid is translated in " + ", ".join(LANGS))
        sys.exit(1 if found else 0)
    {"extract": extract, "update": update, "compile": compile_all}[verb]()
