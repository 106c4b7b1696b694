"""Generate scrapy_simhash/fingerprint/_unicode_data.py from the Unicode Character Database.

The tokenizer of simhash-doc/1 and minhash-doc/1 reads every Unicode property it needs from
that generated module, so a fingerprint does not depend on the installed `regex` release or on
the Python version (whose `unicodedata` follows a different Unicode version in each release).
The module is committed; run this script only to check it or to move to another Unicode
version (which is a change of the fingerprint schemes: new scheme labels, new vectors).

Input: the UCD text files of Unicode 15.0.0 in one folder, e.g. Debian 12's `unicode-data`
package (`apt-get install unicode-data`: /usr/share/unicode) or the unzipped
https://www.unicode.org/Public/15.0.0/ucd/UCD.zip.

    python scripts/generate_unicode_data.py [--ucd /usr/share/unicode] [--check]

--check writes nothing and exits 1 when the committed module differs from what the UCD gives.
Either way, the NFC of the tables is then checked against the UCD's NormalizationTest.txt (.bz2).
"""

from __future__ import annotations

import argparse
import bz2
import sys
from collections.abc import Iterator
from pathlib import Path

VERSION = "15.0.0"
OLDEST_PYTHON_UNICODE = "13.0"
"""The Unicode version of the oldest supported Python's unicodedata (3.10); ages after it are kept."""

UNSPACED_SCRIPTS = ("Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar")
CLASS_RUN, CLASS_LETTER, CLASS_UNSPACED = 1, 2, 4  # the values of tokenizer.CLASS_*

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "scrapy_simhash" / "fingerprint" / "_unicode_data.py"


def _fields(path: Path) -> Iterator[list[str]]:
    """The ';'-separated fields of each data line of a UCD file, comments stripped."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [field.strip() for field in line.split(";")]


def _code_points(text: str) -> range:
    first, _, last = text.partition("..")
    return range(int(first, 16), int(last or first, 16) + 1)


def _check_version(ucd: Path) -> None:
    header = (ucd / "DerivedAge.txt").open(encoding="utf-8").readline()
    if f"DerivedAge-{VERSION}.txt" not in header:
        sys.exit(f"{ucd} is not the Unicode {VERSION} UCD (DerivedAge.txt starts {header.strip()!r})")


def _unicode_data(ucd: Path) -> tuple[dict[int, str], dict[int, int], dict[int, tuple[int, ...]]]:
    """General category, nonzero canonical combining classes and canonical decompositions."""
    category: dict[int, str] = {}
    ccc: dict[int, int] = {}
    decomposition: dict[int, tuple[int, ...]] = {}
    first = None
    for fields in _fields(ucd / "UnicodeData.txt"):
        cp, name, cat = int(fields[0], 16), fields[1], fields[2]
        if name.endswith(", First>"):
            first = cp
            continue
        for c in range(first if name.endswith(", Last>") else cp, cp + 1):
            category[c] = cat
        if int(fields[3]):
            ccc[cp] = int(fields[3])
        if fields[5] and not fields[5].startswith("<"):
            decomposition[cp] = tuple(int(part, 16) for part in fields[5].split())
    return category, ccc, decomposition


def _ranges(code_points: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in sorted(code_points):
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def build(ucd: Path) -> dict[str, object]:
    """Every table of the generated module, from the UCD files."""
    _check_version(ucd)
    category, ccc, decomposition = _unicode_data(ucd)
    unspaced = set()
    for code_points, script in _fields(ucd / "Scripts.txt"):
        if script in UNSPACED_SCRIPTS:
            unspaced.update(_code_points(code_points))
    classes = bytearray(0x110000)
    for cp, cat in category.items():
        flags = 0
        if cat[0] in "LM" or cat in ("Nd", "Pc"):
            flags |= CLASS_RUN
        if cat[0] == "L":
            flags |= CLASS_LETTER
        if cp in unspaced:
            flags |= CLASS_UNSPACED
        classes[cp] = flags
    class_runs: list[int] = []
    for cp, flags in enumerate(classes):
        if cp == 0 or flags != classes[cp - 1]:
            class_runs += [cp, flags]
    oldest = tuple(map(int, OLDEST_PYTHON_UNICODE.split(".")))
    assigned_since: dict[str, set[int]] = {}
    for code_points, age in _fields(ucd / "DerivedAge.txt"):
        if tuple(map(int, age.split("."))) > oldest:
            assigned_since.setdefault(age, set()).update(_code_points(code_points))
    exclusions = set()
    for fields in _fields(ucd / "DerivedNormalizationProps.txt"):
        if fields[1] == "Full_Composition_Exclusion":
            exclusions.update(_code_points(fields[0]))
    casefold = {
        int(cp, 16): "".join(chr(int(part, 16)) for part in mapping.split())
        for cp, status, mapping in (fields[:3] for fields in _fields(ucd / "CaseFolding.txt"))
        if status in ("C", "F")
    }
    unassigned = set(range(0x110000)) - set(category)
    return {
        "class_runs": class_runs,
        "unassigned": _ranges(unassigned),
        "assigned_since": {age: _ranges(cps) for age, cps in sorted(assigned_since.items())},
        "ccc": ccc,
        "decomposition": decomposition,
        "composition_exclusions": _ranges(exclusions),
        "casefold": casefold,
    }


def _wrapped(items: list[str], indent: str = "    ", width: int = 100) -> str:
    lines, line = [], indent
    for item in items:
        if len(line) + len(item) + 2 > width and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += item + ", "
    if line.strip():
        lines.append(line.rstrip())
    return "\n".join(lines)


def _range_items(ranges: list[tuple[int, int]]) -> list[str]:
    return [f"0x{a:X}, 0x{b:X}" for a, b in ranges]


def render(tables: dict) -> str:
    """The text of the generated module."""
    runs = tables["class_runs"]
    run_items = [f"0x{runs[i]:X}, {runs[i + 1]}" for i in range(0, len(runs), 2)]
    since = "\n".join(
        f'    "{age}": (\n{_wrapped(_range_items(ranges), " " * 8)}\n    ),'
        for age, ranges in tables["assigned_since"].items()
    )
    ccc = [f"0x{cp:X}: {value}" for cp, value in sorted(tables["ccc"].items())]
    decomposition = [
        f"0x{cp:X}: ({', '.join(f'0x{part:X}' for part in parts)},)"
        for cp, parts in sorted(tables["decomposition"].items())
    ]
    # Folded strings are written as escapes, never as raw characters.
    casefold = [
        f"0x{cp:X}: " + '"' + folded.encode("ascii", "backslashreplace").decode("ascii") + '"'
        for cp, folded in sorted(tables["casefold"].items())
    ]
    unassigned = _wrapped(_range_items(tables["unassigned"]))
    exclusions = _wrapped(_range_items(tables["composition_exclusions"]))
    return f'''"""Unicode {VERSION} data of the tokenizer: the Unicode of simhash-doc/1 and minhash-doc/1.

Generated by scripts/generate_unicode_data.py from the Unicode Character Database {VERSION}:
do not edit. Read by scrapy_simhash/fingerprint/pinned_unicode.py.
"""

UNICODE_VERSION = "{VERSION}"

OLDEST_PYTHON_UNICODE = "{OLDEST_PYTHON_UNICODE}"
"""ASSIGNED_SINCE holds every Unicode version after this one, up to UNICODE_VERSION."""

CLASS_RUNS = (
{_wrapped(run_items)}
)
"""(first code point, CLASS_* flags) of each run of code points with the same flags, in order."""

UNASSIGNED = (
{unassigned}
)
"""First and last code point (inclusive) of each range of category Cn (not assigned)."""

ASSIGNED_SINCE = {{
{since}
}}
"""Per Unicode version after OLDEST_PYTHON_UNICODE: first and last code point of each range it assigned."""

CANONICAL_COMBINING_CLASS = {{
{_wrapped(ccc)}
}}
"""Every code point whose canonical combining class is not 0."""

CANONICAL_DECOMPOSITION = {{
{_wrapped(decomposition)}
}}
"""Canonical decomposition mappings (one level; Hangul syllables are algorithmic and not listed)."""

FULL_COMPOSITION_EXCLUSION = (
{exclusions}
)
"""First and last code point of each range NFC never composes to."""

CASEFOLD = {{
{_wrapped(casefold)}
}}
"""Full case folding (CaseFolding.txt statuses C and F); code points not listed fold to themselves."""
'''


def _check_nfc(ucd: Path, module_text: str) -> None:
    """The pinned NFC of the freshly rendered data against the UCD's own normalization tests."""
    namespace: dict[str, object] = {}
    exec(compile(module_text, "_unicode_data", "exec"), namespace)
    sys.path.insert(0, str(ROOT))
    from scrapy_simhash.fingerprint import pinned_unicode

    nfc = pinned_unicode.Normalizer(namespace).nfc  # type: ignore[arg-type]
    path = ucd / "NormalizationTest.txt"
    if not path.exists():
        path = ucd / "NormalizationTest.txt.bz2"
    checked = 0
    with (
        bz2.open(path, "rt", encoding="utf-8")
        if path.suffix == ".bz2"
        else path.open(encoding="utf-8") as lines
    ):
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("@"):
                continue
            columns = ["".join(chr(int(cp, 16)) for cp in column.split()) for column in line.split(";")[:5]]
            for source in columns[:3]:
                if nfc(source) != columns[1]:
                    sys.exit(f"pinned NFC fails NormalizationTest: {line}")
            for source in columns[3:5]:
                if nfc(source) != columns[3]:
                    sys.exit(f"pinned NFC fails NormalizationTest: {line}")
            checked += 1
    print(f"pinned NFC passes {checked} NormalizationTest lines")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ucd", type=Path, default=Path("/usr/share/unicode"), help="folder of the UCD files"
    )
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed module, write nothing"
    )
    args = parser.parse_args()
    text = render(build(args.ucd))
    if args.check:
        if OUTPUT.read_text(encoding="utf-8") != text:
            sys.exit(f"{OUTPUT} differs from what the UCD in {args.ucd} gives: regenerate it")
        print(f"{OUTPUT} is up to date")
    else:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUTPUT}")
    _check_nfc(args.ucd, text)


if __name__ == "__main__":
    main()
