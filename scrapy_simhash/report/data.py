"""Load report inputs into one :class:`~.model.ReportData`: ``dedupe --report`` rows, an index, or WARCs.

A bad row or record is counted and named in the report's notes; it never ends the load.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..index import is_server_uri
from ..index.extractor_record import recorded_extractors
from ..warc.read.wacz import open_archive
from ..warc.revisits import REVISIT_METHOD
from .captures import RowCaptures, capture_of_row
from .indexes import load_index, open_for_reading, pages_of_index
from .model import (
    DEFAULT_K,
    MAX_NOTES,
    Cluster,
    Page,
    ReportData,
    build,
    named_extractor,
    rule_for,
)
from .timeline.model import Capture, build_timelines
from .values import fraction, parse_simhash, text_field, whole_number
from .warcs import load_warcs, read_pages


def input_kind(location: str) -> str:
    """``index`` (a server URI, or a directory holding an index's database), ``rows`` (a dedupe
    report: .jsonl/.json/.csv or a file starting with ``{``) or ``warc`` (anything else, directories
    of archives included)."""
    if is_server_uri(location):
        return "index"
    if os.path.isdir(location):
        from ..index.embedded.embedded import DATABASE
        from ..index.embedded.minhash_store import DATABASE as MINHASH_DATABASE

        if os.path.exists(os.path.join(location, MINHASH_DATABASE)):
            raise ValueError(f"{location} is a MinHash index: the report reads simhash indexes only")
        return "index" if os.path.exists(os.path.join(location, DATABASE)) else "warc"
    lower = location.lower()
    if lower.endswith((".jsonl", ".ndjson", ".json", ".csv")):
        return "rows"
    try:
        with open_archive(location) as fh:
            head = fh.read(64).lstrip()
    except OSError as exc:
        raise ValueError(f"cannot read {location}: {exc.strerror or exc}") from exc
    return "rows" if head.startswith(b"{") else "warc"


def load(
    inputs: list[str], *, k: int | None = None, threshold: float | None = None, backend: str = "auto"
) -> ReportData:
    """All ``inputs`` must be of one kind (several report files, several WARCs, or one index)."""
    if not inputs:
        raise ValueError("no input given")
    kinds = {input_kind(i) for i in inputs}
    if len(kinds) > 1:
        raise ValueError(f"give inputs of one kind (dedupe reports, WARCs or one index), not {sorted(kinds)}")
    kind = kinds.pop()
    if kind == "index":
        if len(inputs) > 1:
            raise ValueError("give one index at a time")
        return load_index(inputs[0], k=k, threshold=threshold)
    if kind == "rows":
        return load_rows(inputs, k=k, threshold=threshold)
    return load_warcs(inputs, k=k, threshold=threshold, backend=backend)


def load_pages(inputs: list[str], *, backend: str = "auto") -> tuple[list[Page], int | None, list[str]]:
    """Every page the inputs know, oldest first, the index's own ``k`` (None for other inputs), and notes."""
    if not inputs:
        raise ValueError("no input given")
    kinds = {input_kind(i) for i in inputs}
    if len(kinds) > 1 or ("index" in kinds and len(inputs) > 1):
        raise ValueError("give inputs of one kind: dedupe reports, WARCs, or one index")
    kind = kinds.pop()
    if kind == "index":
        index = open_for_reading(inputs[0])
        try:
            pages = pages_of_index(index)
            recorded, _mixed = recorded_extractors(index.notes())
            for page in pages:
                page.extractor = recorded
            return pages, int(index.k), []
        finally:
            close = getattr(index, "close", None)
            if close:
                close()
    if kind == "rows":
        data = load_rows(inputs)
        return [m for c in data.clusters for m in c.members], None, data.notes
    pages, _html, notes = read_pages(inputs, backend=backend)
    return pages, None, notes


# -- dedupe --report rows ----------------------------------------------------------------------------


def _rows(path: str, notes: list[str], bad: Counter[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        if path.lower().endswith(".csv"):
            for number, row in enumerate(csv.DictReader(fh), start=2):
                yield number, {k: (v if v != "" else None) for k, v in row.items()}
            return
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                bad[path] += 1
                if len(notes) < MAX_NOTES:
                    notes.append(f"{path} line {number}: not a report row ({exc})")
                continue
            yield number, row


def page_from_row(row: dict[str, Any]) -> Page:
    """One ``dedupe --report`` row (JSON or CSV) as a page; ValueError names a bad field."""
    simhash = text_field(row.get("simhash"), "simhash")
    file, offset = text_field(row.get("file"), "file"), whole_number(row.get("offset"), "offset")
    uri, record_id = text_field(row.get("uri"), "uri"), text_field(row.get("record_id"), "record_id")
    key = f"{file}#{offset}" if file is not None else str(record_id or uri)
    return Page(
        key=key,
        uri=uri,
        date=text_field(row.get("date"), "date"),
        file=file,
        offset=offset,
        record_id=record_id,
        simhash=parse_simhash(simhash) if simhash else None,
        distance=whole_number(row.get("distance"), "distance", 0, 64),
        similarity=fraction(row.get("similarity"), "similarity"),
        original=row.get("role") == "original",
        extractor=str(row["extractor"]) if row.get("extractor") else None,
    )


_RULE_LABEL = re.compile(r"(verified|simhash|minhash)((?: [a-z]+=[0-9.e+-]+)*)")


def parse_rule_label(label: str) -> tuple[str, dict[str, float]]:
    """The ``rule`` column of ``dedupe`` rows (``verified similarity=0.5 distance=3``,
    ``simhash distance=3``, ``minhash threshold=0.8``) as (mode, parameters); ValueError otherwise."""
    match = _RULE_LABEL.fullmatch(label.strip())
    if match is None:
        raise ValueError(f"rule {label!r} is not one dedupe writes")
    params = {}
    for pair in match.group(2).split():
        name, _, value = pair.partition("=")
        params[name] = float(value)
    return match.group(1), params


def _rows_rule(
    labels: Counter[str], notes: list[str], *, k: int | None, threshold: float | None, minhash_rows: bool
) -> tuple[str | None, int | None, float | None]:
    """(mode, k, similarity threshold) of the run the rows record, the caller's values first."""
    from ..warc.dedupe import DEFAULT_THRESHOLD  # --method minhash's

    rules = []
    for label, count in labels.most_common():
        try:
            rules.append((label, count, parse_rule_label(label)))
        except ValueError as exc:
            notes.append(f"{count} row(s): {exc}")
    if len(rules) > 1:
        listed = ", ".join(f"{label} ({count} rows)" for label, count, _ in rules)
        notes.append(f"the rows were made by several rules: {listed}; the first one's thresholds are drawn")
    if not rules:
        mode = "minhash" if minhash_rows else None
        default = DEFAULT_THRESHOLD if minhash_rows else rule_for().similarity
        return mode, k, threshold if threshold is not None else default
    mode, params = rules[0][2]
    if k is None and "distance" in params:
        k = int(params["distance"])
    if threshold is None:
        threshold = params.get("threshold" if mode == "minhash" else "similarity")
    return mode, k, threshold


def captures_of_rows(paths: list[str], uri: str) -> tuple[list[Capture], set[str], list[str]]:
    """The captures of ``uri`` in ``dedupe --report`` files, every URI they hold, and notes."""
    notes: list[str] = []
    captures: list[Capture] = []
    uris: set[str] = set()
    for path in paths:
        for number, row in _rows(path, notes, Counter()):
            capture = capture_of_row(row, number)
            if capture is not None:
                uris.add(capture.uri)
                if capture.uri == uri:
                    captures.append(capture)
    return captures, uris, notes


def load_rows(paths: list[str], *, k: int | None = None, threshold: float | None = None) -> ReportData:
    """Clusters exactly as ``dedupe`` wrote them; several files are numbered one after the other.

    The thresholds drawn are the run's (the rows' ``rule`` column) unless ``k`` / ``threshold`` say."""
    notes: list[str] = []
    bad: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    keeps: Counter[str] = Counter()
    extractors: Counter[str] = Counter()
    minhash_rows = False
    clusters: dict[tuple[int, Any], Cluster] = {}
    pages: list[Page] = []
    revisits = Counter[bool]()
    captures = RowCaptures()
    for index, path in enumerate(paths):
        for number, row in _rows(path, notes, bad):
            if row.get("method") == REVISIT_METHOD:  # an exact duplicate by revisit: counted, not drawn
                revisits[row.get("cluster") is not None] += 1
                captures.add_revisit(row)
                continue
            try:
                page = page_from_row(row)
                cluster = clusters.setdefault((index, row["cluster"]), Cluster(len(clusters), []))
                label = text_field(row.get("rule"), "rule")
            except (KeyError, ValueError, TypeError, OverflowError) as exc:
                bad[path] += 1
                if len(notes) < MAX_NOTES:
                    notes.append(f"{path} line {number}: bad row ({type(exc).__name__}: {exc})")
                continue
            if label:
                labels[label] += 1
            keep = row.get("keep")
            if isinstance(keep, str) and keep:
                keeps[keep] += 1
            if page.extractor:
                extractors[page.extractor] += 1
            minhash_rows = minhash_rows or row.get("scheme") is not None
            pages.append(page)
            captures.add_page(page, row)
            cluster.members.append(page)
    if revisits:  # a cluster of a record and its revisits only (an image, a page alone) is no cluster
        clusters = {key: c for key, c in clusters.items() if len(c.members) > 1}
        pages = [p for c in clusters.values() for p in c.members]
    for cluster in clusters.values():
        first = next((m for m in cluster.members if m.original), cluster.members[0])
        cluster.members = [first] + [m for m in cluster.members if m is not first]
        for member in cluster.members:
            member.original = member is first
    for path, count in bad.items():
        notes.append(f"{path}: {count} row(s) passed over")
    notes.append(
        "a dedupe report holds only the pages in clusters: pages seen, fingerprinted, skipped and "
        "unique are not in it"
    )
    has_similarity = any(p.similarity is not None for p in pages)
    has_simhash = any(p.simhash is not None for p in pages)
    given_threshold = threshold
    mode, k, threshold = _rows_rule(labels, notes, k=k, threshold=threshold, minhash_rows=minhash_rows)
    if k is None and has_simhash:
        k = DEFAULT_K
    if not labels and pages:
        drawn = [f"k = {k}"] if has_simhash else []
        drawn += [f"similarity {threshold:g}"] if has_similarity and threshold is not None else []
        notes.append(
            "the rows do not say which rule made them (no rule column: an older dedupe): the thresholds "
            f"drawn are {' and '.join(drawn) or 'none'}, the defaults unless --distance / --threshold "
            "gave them"
        )
    if has_simhash and mode != "verified":
        notes.append("in a chain a~b~c a member can be farther than k from its original")
    if mode == "simhash" and given_threshold is None:
        threshold = None  # simhash mode decides by distance alone: no similarity threshold to draw
    if len(keeps) > 1:
        listed = ", ".join(f"{name} ({count} rows)" for name, count in keeps.most_common())
        notes.append(f"the rows' originals were chosen by several keep policies: {listed}")
    extractor, several = named_extractor(extractors, "the rows")
    notes += several
    data = build(
        "dedupe report",
        paths,
        pages,
        list(clusters.values()),
        k=k,
        threshold=threshold if has_similarity or given_threshold is not None else None,
        notes=notes,
        mode=mode,
        keep=" / ".join(name for name, _ in keeps.most_common()) or None,
        extractor=extractor,
        extractors=tuple(extractors),
        revisits=(revisits[True], revisits[False]) if revisits else None,
    )
    data.timelines = build_timelines(captures.captures())
    data.timelines.notes.append(
        "a dedupe report lists only the pages in clusters: captures in no cluster are not in these "
        "timelines (give the WARCs or their sidecars for every capture)"
    )
    if pages and not captures.has_change_column:
        data.timelines.notes.append(
            "the rows carry no text_change column (an older dedupe): the kinds are not recorded"
        )
    return data
