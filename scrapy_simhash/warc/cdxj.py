"""CDXJ index lines carrying the simhash fields, for replay tools (pywb, OutbackCDX-style CDXJ readers).

The lines are built by cdxj-indexer (the pywb authors' indexer) so that SURT, timestamp, mime, status,
digest, length, offset and filename are exactly what pywb computes; this module only adds keys to the
JSON of the response records it has a fingerprint for. The fingerprints come from the archive itself
(``metadata`` records a crawl wrote ``WARC-Concurrent-To`` the response) or from the input's sidecar
(``<input>.simhash.warc.gz`` written by ``tag``: ``WARC-Refers-To`` the record, ``source-offset`` its
position). :func:`merge_index` adds the same keys to the lines of an existing index instead, leaving
every other byte alone. cdxj-indexer is given only the intact stretches of each archive
(:mod:`.read.spans`): the damage-aware reader ``tag`` uses names each damaged range.

cdxj-indexer is imported only when an index is built (``pip install cdxj-indexer``).
"""

from __future__ import annotations

import json
import os
import posixpath
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from warcio.archiveiterator import ArchiveIterator

from ..fingerprint import SCHEME, to_base32
from .pipeline import FileStart, Options, Pipeline
from .progress import Progress
from .read.inputs import Input, plan_inputs
from .read.reader import ArchiveReader, ReadProblem
from .read.spans import SpanStream, readable_spans
from .read.wacz import SEPARATOR, archive_size, open_archive, split_location
from .records import SIMHASH, SIMHASH_SCHEME, SOURCE_OFFSET, TEXT_EXTRACTOR, WARC_FIELDS, parse_fields

MINHASH = "minhash"
MINHASH_SCHEME = "minhash-scheme"
CDXJ_KEYS = (SIMHASH, SIMHASH_SCHEME, TEXT_EXTRACTOR, MINHASH, MINHASH_SCHEME)
"""The metadata fields copied into a CDXJ line's JSON, under the same names, when present."""

MISSING_INDEXER = (
    "cdxj-indexer is not installed: pip install 'scrapy-simhash[cdxj]' (cdxj-indexer builds the CDXJ lines)"
)

Fields = dict[str, str]


def cdxj_keys(pairs: Iterable[tuple[str, str]]) -> Fields | None:
    """The keys for a CDXJ line out of a metadata block; None when it holds no fingerprint."""
    values = dict(pairs)
    found = {name: values[name] for name in CDXJ_KEYS if values.get(name)}
    return found if (SIMHASH in found or MINHASH in found) else None


def has_keys(line: CdxjLine) -> bool:
    """Whether a line carries any of the added keys."""
    return any(key in line.fields for key in CDXJ_KEYS)


@dataclass
class CdxjSummary:
    """What a run did, for the closing line on stderr."""

    files: int = 0
    lines: int = 0
    with_fields: int = 0
    sidecars: int = 0
    unmatched_fingerprints: int = 0
    already_had_fields: int = 0
    not_cdxj: int = 0
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        text = (
            f"{self.files} files, {self.lines} lines, {self.with_fields} with simhash fields, "
            f"{self.sidecars} sidecars read"
        )
        if self.unmatched_fingerprints:
            text += f", {self.unmatched_fingerprints} fingerprints matched no indexed record"
        if self.already_had_fields:
            text += f", {self.already_had_fields} lines already had the fields (left unchanged)"
        if self.not_cdxj:
            text += f", {self.not_cdxj} lines not CDXJ (left unchanged)"
        if self.problems:
            text += f", {len(self.problems)} problems"
        return text


# -- where the fingerprints come from ----------------------------------------------------------------


@dataclass
class _Found:
    """One file's fingerprints, by the described record's id and (sidecars) its offset."""

    by_id: dict[str, Fields] = field(default_factory=dict)
    by_offset: dict[int, Fields] = field(default_factory=dict)
    used: set[int] = field(default_factory=set)

    def lookup(self, record_id: str | None, offset: int) -> Fields | None:
        keys = self.by_id.get(record_id) if record_id else None
        if keys is None:
            keys = self.by_offset.get(offset)
        if keys is not None:
            self.used.add(id(keys))
        return keys

    def unmatched(self) -> int:
        """Fingerprints no indexed record took (e.g. the record of a stale or foreign sidecar)."""
        every = {id(v) for v in self.by_id.values()} | {id(v) for v in self.by_offset.values()}
        return len(every - self.used)


def read_sidecar(entry: Input, summary: CdxjSummary) -> _Found:
    """The fingerprints of ``entry``'s sidecar, by the described record's id and offset.

    A sidecar written for another version of the input (its ``source-size`` differs) is not used:
    its offsets would point at other records."""
    found = _Found()
    if not entry.sidecar.is_file():
        return found
    size = archive_size(entry.path)
    try:
        with open(entry.sidecar, "rb") as fh:
            for record in ArchiveIterator(fh, no_record_parse=True):
                block = record.content_stream().read()
                headers = record.rec_headers
                if record.rec_type == "warcinfo":
                    declared = dict(parse_fields(block)).get("source-size")
                    if declared is not None and declared != str(size):
                        summary.problems.append(
                            f"{entry.sidecar}: written for a {declared}-byte {entry.path.name}, "
                            f"which now has {size} bytes: sidecar not used"
                        )
                        return _Found()
                    continue
                if record.rec_type != "metadata":
                    continue
                pairs = parse_fields(block)
                keys = cdxj_keys(pairs)
                if keys is None:
                    continue
                refers_to = headers.get_header("WARC-Refers-To")
                if refers_to:
                    found.by_id[refers_to] = keys
                offset = dict(pairs).get(SOURCE_OFFSET)
                if offset is not None and offset.isdigit():
                    found.by_offset[int(offset)] = keys
    except Exception as exc:  # a damaged sidecar loses its own fingerprints, not the run
        read = len(found.by_offset) or len(found.by_id)
        summary.problems.append(
            f"{entry.sidecar}: unreadable sidecar ({exc}); {read} fingerprints read before"
        )
    summary.sidecars += 1
    return found


def compute_fingerprints(
    entries: Sequence[Input],
    options: Options,
    summary: CdxjSummary,
    known: Collection[ReadProblem] = (),
) -> dict[str, _Found]:
    """``--compute``: fingerprint the inputs' HTML records as ``tag`` does (same pipeline, extractor and
    minimum), in memory, by record id and offset. Problems are reported, except those in ``known``
    (already reported by the indexing); records the pipeline could not read simply get no keys."""
    found: dict[str, _Found] = {}
    current = _Found()
    extractor = options.extractor.description
    progress = Progress(len(entries), enabled=False)
    pipeline = Pipeline(options, progress)
    for event in pipeline.run(list(entries)):
        if isinstance(event, FileStart):
            current = found.setdefault(str(event.input.path), _Found())
        elif isinstance(event, ReadProblem):
            if event.skipped and event not in known:
                summary.problems.append(f"--compute: {event}")
        elif isinstance(event, list):
            for result in event:
                if result.simhash is None:
                    continue
                keys = {SIMHASH: to_base32(result.simhash), SIMHASH_SCHEME: SCHEME, TEXT_EXTRACTOR: extractor}
                if result.minhash is not None:  # as tag writes it in verified mode (the default)
                    keys[MINHASH] = result.minhash.to_text()
                    keys[MINHASH_SCHEME] = result.minhash.scheme
                if result.record_id:
                    current.by_id[result.record_id] = keys
                current.by_offset[result.offset] = keys
    # a revisit of a page gets the page's simhash keys (not its sketch), as tag's sidecar record gives them
    for file, resolutions in pipeline.revisits.resolve_all().items():
        for resolution in resolutions:
            original, revisit = resolution.original, resolution.revisit
            if original is None or original.file not in found:
                continue
            page = found[original.file].by_offset.get(original.offset)
            if page is None:
                continue
            keys = {name: value for name, value in page.items() if name not in (MINHASH, MINHASH_SCHEME)}
            into = found.setdefault(file, _Found())
            if revisit.record_id:
                into.by_id[revisit.record_id] = keys
            into.by_offset[revisit.offset] = keys
    return found


# -- building lines with cdxj-indexer ----------------------------------------------------------------


@dataclass(frozen=True)
class CdxjLine:
    urlkey: str
    timestamp: str
    fields: dict[str, Any]

    def text(self) -> str:
        """The line as cdxj-indexer writes it (``json.dumps`` with its default separators)."""
        return f"{self.urlkey} {self.timestamp} {json.dumps(self.fields)}\n"


def _indexer_class() -> type:
    try:
        from cdxj_indexer.main import CDXJIndexer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise OSError(MISSING_INDEXER) from exc

    class SimhashCDXJIndexer(CDXJIndexer):
        """cdxj-indexer's own indexer; records are held per file until its fingerprints are known
        (a crawl writes the metadata record after the response), then handed on with the keys."""

        def __init__(
            self,
            sink: Callable[[CdxjLine], None],
            found: dict[str, _Found],
            computed: dict[str, _Found],
            summary: CdxjSummary,
            **kw: Any,
        ):
            super().__init__(None, [], **kw)
            self.sink = sink
            self.found = found
            self.computed = computed
            self.fallback = _Found()
            self.summary = summary
            self.pending: list[tuple[CdxjLine, str | None]] = []
            self.carry: list[tuple[CdxjLine, str | None]] = []
            self.here = _Found()
            self.record_id: str | None = None

        def process_one(
            self, input_: Any, output: Any, filename: str, spans: list[tuple[int, int]] | None = None
        ) -> None:
            """Index ``input_``, or with ``spans`` only those byte ranges of it (the intact ones)."""
            self.pending = []
            self.here = self.found.get(filename) or _Found()
            self.fallback = self.computed.get(filename) or _Found()
            try:
                if spans is None:
                    super().process_one(input_, output, filename)
                for start, end in spans or ():
                    try:
                        super().process_one(SpanStream(input_, start, end), output, filename)
                    except Exception as exc:  # the indexer's own failure: the next stretch is still indexed
                        self.summary.problems.append(
                            f"{filename}: not indexed past the failure in bytes {start}-{end}: {exc}"
                        )
            finally:  # a file that fails half-way keeps the lines read before the failure
                self._flush()

        def _flush(self) -> None:
            # the previous file's lines still without a fingerprint: a crawl that rolled over to a new
            # file between a response and its metadata record wrote the latter at the head of this one
            carried, self.carry = self.carry, []
            for line, record_id in carried:
                self._emit(line, self.here.lookup(record_id, -1))
            for line, record_id in self.pending:
                offset = int(line.fields.get("offset", -1))
                # a fingerprint recorded in the archive or its sidecar wins over one computed now
                keys = self.here.lookup(record_id, offset) or self.fallback.lookup(record_id, offset)
                if keys is None and record_id:
                    self.carry.append((line, record_id))
                else:
                    self._emit(line, keys)
            self.pending = []
            self.summary.unmatched_fingerprints += self.here.unmatched()
            self.summary.files += 1

        def finish(self) -> None:
            """Hand on the last file's lines held back for a next file."""
            carried, self.carry = self.carry, []
            for line, _ in carried:
                self._emit(line, None)

        def _emit(self, line: CdxjLine, keys: Fields | None) -> None:
            if keys:
                line.fields.update(keys)
                self.summary.with_fields += 1
            self.summary.lines += 1
            self.sink(line)

        def filter_record(self, record: Any) -> bool:
            headers = record.rec_headers
            if record.rec_type == "metadata" and headers.get_header("Content-Type") == WARC_FIELDS:
                target = headers.get_header("WARC-Concurrent-To") or headers.get_header("WARC-Refers-To")
                if target:
                    keys = cdxj_keys(parse_fields(record.content_stream().read()))
                    if keys is not None:
                        self.here.by_id.setdefault(target, keys)
            return bool(super().filter_record(record))

        def _resolve_rel_path(self, filename: str) -> str:
            """A WARC inside a WACZ is ``collection.wacz#archive/data.warc.gz``: the package's name
            (base name, or relative to ``dir_root``) and the member's path inside it."""
            split = split_location(filename)
            if split is None:
                return str(super()._resolve_rel_path(filename))
            return f"{super()._resolve_rel_path(split[0])}{SEPARATOR}{split[1]}"

        def _write_line(self, out: Any, index: Any, record: Any, filename: str) -> None:
            self.record_id = record.rec_headers.get_header("WARC-Record-ID")
            super()._write_line(out, index, record, filename)

        def _do_write(self, urlkey: str, ts: str, index: Any, out: Any) -> None:
            self.pending.append((CdxjLine(urlkey, ts, dict(index)), self.record_id))

    return SimhashCDXJIndexer


def index_lines(
    inputs: Sequence[str | os.PathLike[str]],
    *,
    sidecar_dir: str | os.PathLike[str] | None = None,
    dir_root: str | os.PathLike[str] | None = None,
    summary: CdxjSummary | None = None,
    compute: Options | None = None,
    emit: Callable[[CdxjLine], None] | None = None,
) -> list[CdxjLine]:
    """The CDXJ lines of ``inputs`` (files or directories), unsorted, with the simhash keys added.

    ``filename`` is the archive's base name, or with ``dir_root`` its path relative to it (as
    cdxj-indexer's ``--dir-root``); sidecars are looked up beside each input, or under ``sidecar_dir``
    as ``tag --out`` wrote them. With ``compute``, records with no recorded fingerprint get one
    computed with those options. With ``emit``, each file's lines go to it as the file is done (and
    the list returned is empty): a large archive set is never held in memory as a whole."""
    summary = summary if summary is not None else CdxjSummary()
    planned = plan_inputs(inputs, out=sidecar_dir)
    entries = []
    for entry in planned:
        if entry.not_read:
            if entry.lost:
                summary.problems.append(f"{entry.path}: {entry.not_read}")
            continue
        entries.append(entry)
    found = {str(entry.path): read_sidecar(entry, summary) for entry in entries}
    # each archive read first as `tag` reads it: its damaged ranges are named and left out
    reader = ArchiveReader(compute.reader if compute is not None else "auto")
    readable = {str(entry.path): readable_spans(entry.path, reader) for entry in entries}
    for item in readable.values():
        summary.problems.extend(lost.describe() for lost in item.lost)
    known = {lost.problem for item in readable.values() for lost in item.lost}
    computed = compute_fingerprints(entries, compute, summary, known) if compute is not None else {}
    collected: list[CdxjLine] = []
    root = None if dir_root is None else str(dir_root)
    indexer = _indexer_class()(emit or collected.append, found, computed, summary, dir_root=root)
    for entry in entries:
        try:
            with open_archive(entry.path) as fh:
                indexer.process_one(fh, None, str(entry.path), readable[str(entry.path)].spans)
        except Exception as exc:  # one unreadable archive is reported, the others indexed
            summary.problems.append(f"{entry.path}: not indexed past the failure: {exc}")
    indexer.finish()
    return collected


class SortedWriter:
    """Takes lines in any order and writes them sorted as CDXJ requires, with cdxj-indexer's own
    ``--sort`` writer: plain code-point order of the whole line (the byte order of ``LC_ALL=C sort``),
    exact repeats dropped, spilling sorted runs to temporary files past ``max_buffer`` characters
    (32 MB by default) and merging them at :meth:`close`."""

    def __init__(self, out: TextIO, max_buffer: int | None = None) -> None:
        try:
            from cdxj_indexer.main import SortingWriter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise OSError(MISSING_INDEXER) from exc
        self._sorter = SortingWriter(out, max_buffer)

    def __call__(self, line: CdxjLine) -> None:
        self._sorter.write(line.text())

    def close(self) -> None:
        self._sorter.flush()


# -- adding the keys to an existing index --------------------------------------------------------------


def merge_index(
    existing: Iterable[str],
    lines: Iterable[CdxjLine],
    out: TextIO,
    summary: CdxjSummary | None = None,
) -> None:
    """Copy ``existing`` (CDXJ text lines) to ``out``, adding the simhash keys of ``lines`` to the line
    of the same record (same ``filename`` and ``offset``; a bare base name matches a path that ends
    with it). The other lines, and the original part of changed ones, are copied byte for byte; the
    order is kept, so a sorted index stays sorted."""
    summary = summary if summary is not None else CdxjSummary()
    exact: dict[tuple[str, str], Fields] = {}
    by_base: dict[tuple[str, str], Fields | None] = {}
    for line in lines:
        ours = {k: line.fields[k] for k in CDXJ_KEYS if k in line.fields}
        if not ours:
            continue
        name, offset = str(line.fields.get("filename")), str(line.fields.get("offset"))
        exact[(name, offset)] = ours
        base = (posixpath.basename(name), offset)
        by_base[base] = None if base in by_base else ours  # two files of one name: ambiguous
    used: set[tuple[str, str]] = set()
    for raw in existing:
        body = raw.rstrip("\r\n")
        parts = body.split(" ", 2)
        if body.startswith("!") or len(parts) < 3 or not parts[2].startswith("{"):
            if body and not body.startswith("!"):
                summary.not_cdxj += 1
            out.write(raw)
            continue
        try:
            fields = json.loads(parts[2])
        except ValueError:
            summary.not_cdxj += 1
            out.write(raw)
            continue
        summary.lines += 1
        name, offset = str(fields.get("filename")), str(fields.get("offset"))
        key = (name, offset)
        keys = exact.get(key)
        if keys is None:
            key = (posixpath.basename(name), offset)
            keys = by_base.get(key)
        if keys is None:
            out.write(raw)
            continue
        if any(k in fields for k in CDXJ_KEYS):
            summary.already_had_fields += 1
            out.write(raw)
            continue
        used.add(key)
        ending = raw[len(body) :]
        obj = body.rstrip()
        added = json.dumps(keys)[1:]
        sep = "" if obj.endswith("{}") else ", "
        out.write(obj[:-1] + sep + added + ending)
        summary.with_fields += 1
    summary.unmatched_fingerprints = max(0, len(exact) - len(used))


def replace_atomically(path: str | os.PathLike[str]) -> tuple[TextIO, Any]:
    """A temporary text file beside ``path`` and a function that renames it over ``path``
    (so ``-o index.cdxj --merge index.cdxj`` never reads a half-written file)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    fh = os.fdopen(fd, "w", encoding="utf-8", newline="")

    def commit(ok: bool) -> None:
        fh.close()
        if ok:
            os.replace(tmp, target)
        else:
            os.unlink(tmp)

    return fh, commit


def iter_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="") as fh:
        yield from fh
