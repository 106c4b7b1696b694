"""Two texts side by side with the words that differ marked (difflib on words, whitespace kept)."""

from __future__ import annotations

import difflib
import html
import re

_TOKENS = re.compile(r"\s+|[^\s]+")

MAX_WORDS = 6000
"""Words of each side compared; difflib is quadratic in the worst case, the rest is shown unmarked."""


def words(text: str) -> list[str]:
    """Words and the whitespace between them, so that joining the list gives the text back."""
    return _TOKENS.findall(text)


def diff_words(a: str, b: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The two sides as (tag, text) runs: ``same``, ``del`` (only in ``a``), ``ins`` (only in ``b``)."""
    wa, wb = words(a), words(b)
    head_a, tail_a = wa[: MAX_WORDS * 2], "".join(wa[MAX_WORDS * 2 :])
    head_b, tail_b = wb[: MAX_WORDS * 2], "".join(wb[MAX_WORDS * 2 :])
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(None, head_a, head_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            left.append(("same", "".join(head_a[i1:i2])))
            right.append(("same", "".join(head_b[j1:j2])))
            continue
        if i2 > i1:
            left.append(("del", "".join(head_a[i1:i2])))
        if j2 > j1:
            right.append(("ins", "".join(head_b[j1:j2])))
    if tail_a:
        left.append(("same", tail_a))
    if tail_b:
        right.append(("same", tail_b))
    return left, right


def ratio(a: str, b: str) -> float:
    """Share of words the two texts have in common, in order (difflib's ratio on words)."""
    return difflib.SequenceMatcher(None, words(a)[: MAX_WORDS * 2], words(b)[: MAX_WORDS * 2]).ratio()


def runs_html(runs: list[tuple[str, str]]) -> str:
    """Escaped HTML: changed runs in ``<del>``/``<ins>``, which the pages' CSS colours."""
    out = []
    for tag, text in runs:
        escaped = html.escape(text)
        out.append(escaped if tag == "same" else f"<{tag}>{escaped}</{tag}>")
    return "".join(out)


def side_by_side(a: str, b: str) -> tuple[str, str]:
    """The left and right HTML of the diff of ``a`` and ``b``."""
    left, right = diff_words(a, b)
    return runs_html(left), runs_html(right)


CONTEXT_WORDS = 25
"""Unchanged words kept on each side of a change in an inline diff; longer unchanged runs are folded."""

MAX_CHANGED = 4000
"""Characters of removed and added words an inline diff of the report's overview holds; the rest is cut
(and said). The page of one URL's history allows :data:`MAX_CHANGED_ONE_URL`."""

MAX_CHANGED_ONE_URL = 40_000


def _folded(tokens: list[str], *, keep_head: bool, keep_tail: bool, context: int) -> list[list[object]]:
    """An unchanged run, its middle folded into ``["…", words left out]``."""
    keep = context * 2  # a word and the whitespace after it
    if len(tokens) <= keep * (keep_head + keep_tail) + 2:
        return [["=", "".join(tokens)]]
    head = tokens[:keep] if keep_head else []
    tail = tokens[-keep:] if keep_tail else []
    middle = tokens[len(head) : len(tokens) - len(tail)]
    out: list[list[object]] = [["=", "".join(head)]] if head else []
    out.append(["…", sum(1 for t in middle if not t.isspace())])
    return out + ([["=", "".join(tail)]] if tail else [])


Chunk = tuple[bool, list[str], list[str]]
"""(unchanged, tokens of the old text, tokens of the new text)."""


def _size(tokens: list[str]) -> int:
    return sum(1 for t in tokens if not t.isspace())


def _merged(chunks: list[Chunk]) -> list[Chunk]:
    out: list[Chunk] = []
    for same, a, b in chunks:
        if out and not same and not out[-1][0]:
            out[-1] = (False, out[-1][1] + a, out[-1][2] + b)
        else:
            out.append((same, a, b))
    return out


def semantic_chunks(chunks: list[Chunk]) -> list[Chunk]:
    """Unchanged runs no longer than the changes on both sides of them are made part of the change
    (as diff-match-patch's semantic clean-up does): a rewritten paragraph reads as one removal and one
    addition, not as a confetti of shared "the" and "of"."""
    chunks = _merged(chunks)
    while True:
        out: list[Chunk] = []
        absorbed = False
        for i, (same, a, b) in enumerate(chunks):
            if same and 0 < i < len(chunks) - 1:
                before, after = chunks[i - 1], chunks[i + 1]
                words = _size(a)
                if words <= max(_size(before[1]), _size(before[2])) and words <= max(
                    _size(after[1]), _size(after[2])
                ):
                    out.append((False, a, b))
                    absorbed = True
                    continue
            out.append((same, a, b))
        chunks = _merged(out)
        if not absorbed:
            return chunks


def inline_diff(
    a: str, b: str, *, context: int = CONTEXT_WORDS, max_changed: int = MAX_CHANGED
) -> list[list[object]]:
    """``a`` to ``b`` as one sequence of runs: ``["=", text]`` unchanged, ``["-", text]`` removed,
    ``["+", text]`` added, ``["…", n]`` n unchanged words folded, ``["!", n]`` the diff cut after n
    characters of changes (the rest left out). Empty when the texts have the same words."""
    wa, wb = words(a)[: MAX_WORDS * 2], words(b)[: MAX_WORDS * 2]
    keys_a, keys_b = ([" " if t.isspace() else t for t in w] for w in (wa, wb))  # words, not spacing
    if [t for t in keys_a if t != " "] == [t for t in keys_b if t != " "]:
        return []
    opcodes = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes()
    chunks = semantic_chunks([(op == "equal", wa[i1:i2], wb[j1:j2]) for op, i1, i2, j1, j2 in opcodes])
    runs: list[list[object]] = []
    changed = 0
    for position, (same, old, new) in enumerate(chunks):
        if same:
            last = position == len(chunks) - 1
            runs += _folded(old, keep_head=position > 0, keep_tail=not last, context=context)
            continue
        for tag, part in (("-", old), ("+", new)):
            text = "".join(part)
            if not text:
                continue
            if changed + len(text) > max_changed:
                runs.append([tag, text[: max(0, max_changed - changed)]])
                runs.append(["!", max_changed])
                return runs
            changed += len(text)
            runs.append([tag, text])
    return runs
