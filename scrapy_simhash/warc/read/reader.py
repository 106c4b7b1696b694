"""Iterate the records of WARC and ARC files, whatever state they are in.

Two backends give the same :class:`ArchiveRecord` stream: warcio (always
available, reads WARC and ARC) and FastWARC (faster, WARC only, optional extra
``warc-fast``). Both hand over only the record framing (offset, WARC headers,
raw block); HTTP parsing and decoding happen once, in :mod:`.payload`, so the
two backends cannot disagree about a page.

A damaged file never ends a run: each problem is yielded as a
:class:`ReadProblem` (file, offset, reason) and reading resumes at the next
record boundary found after the damage, or with the next file. In per-record
gzip files the gzip layer is read here (:mod:`.gzip_members`), not by the
backends: each member is checked before it is parsed, a damaged one is one
problem, and both backends parse the same verified bytes. Where FastWARC and
warcio could still see a record differently (a wrong Content-Length, stray
bytes), warcio decides (:class:`~.framing.Recorder`), so both give the same
records and problems.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import BinaryIO

from .framing import OffsetStream, Recorder, record_type, resync, warcio_iterator
from .gzip_members import MemberStream, SingleStream, scan
from .links import RecordLinks, record_links
from .results import ArchiveRecord, ReadProblem, clean_uri
from .sniff import FileKind, sniff
from .wacz import archive_size, open_archive

__all__ = [
    "ArchiveReader",
    "ArchiveRecord",
    "FileKind",
    "ReadProblem",
    "RecordLinks",
    "fastwarc_available",
    "sniff",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_BLOCK = 16 * 1024 * 1024
"""Blocks are read into memory up to this size; the rest is skipped (and the record flagged)."""

MAX_RESYNCS = 1000
"""A file that needs more resynchronisations than this is given up (it is not an archive)."""

RECOMPRESS_HINT = (
    "the file is gzipped as one stream instead of one gzip member per record, so its offsets cannot be used "
    "by CDX indexes or replay; fix: recompress per record, e.g. `warcio recompress IN.warc.gz OUT.warc.gz`"
)


def fastwarc_available() -> bool:
    try:
        import fastwarc.warc  # noqa: F401
    except ImportError:
        return False
    return True


class ArchiveReader:
    """Records of WARC/ARC files.

    ``backend``: ``"auto"`` (FastWARC when installed), ``"warcio"`` or ``"fastwarc"``. ARC files are
    always read by warcio (FastWARC does not read ARC).
    """

    def __init__(self, backend: str = "auto", max_block: int = DEFAULT_MAX_BLOCK) -> None:
        if backend == "auto":
            backend = "fastwarc" if fastwarc_available() else "warcio"
        if backend not in ("warcio", "fastwarc"):
            raise ValueError(f"unknown WARC reader backend {backend!r}: use auto, warcio or fastwarc")
        if backend == "fastwarc" and not fastwarc_available():
            raise ValueError("the fastwarc reader needs FastWARC: pip install 'scrapy-simhash[warc-fast]'")
        self.backend = backend
        self.max_block = max_block
        self._resume_at = 0
        self._record_start: int | None = None
        """Where the last record parsed began (its parser's position), for restarts after damage."""
        self._place: Callable[[int], int] = _same
        self._starts_member: Callable[[int], bool] = _never
        """Parser position to file offset (the member's offset, while parsing decompressed members)."""

    def read(self, path: str | os.PathLike[str]) -> Iterator[ArchiveRecord | ReadProblem]:
        """Every record of ``path`` in file order, with problems interleaved where they occur."""
        path = os.fspath(path)
        for item in self._read(path):
            yield item
            if isinstance(item, ArchiveRecord) and item.header_cut:
                yield ReadProblem(
                    path,
                    item.offset,
                    "record header cut off (no Content-Length): the file ends inside it, or it is damaged; "
                    "the record is not fingerprinted",
                )
            elif isinstance(item, ArchiveRecord) and item.clipped:
                yield ReadProblem(
                    path,
                    item.offset,
                    f"record clipped: the file ends after {len(item.block)} bytes of its block, before its "
                    f"declared length; the record is not fingerprinted",
                )
            elif isinstance(item, ArchiveRecord) and item.truncated:
                yield ReadProblem(
                    path,
                    item.offset,
                    f"record block over the {self.max_block} byte limit: "
                    f"the page is fingerprinted from its first {self.max_block} bytes",
                    skipped=False,
                )

    def _read(self, path: str) -> Iterator[ArchiveRecord | ReadProblem]:
        try:
            kind = sniff(path)
            size = archive_size(path)
        except OSError as exc:
            yield ReadProblem(path, None, f"cannot open: {exc}")
            return
        if size == 0:
            return
        if kind.compression in ("lz4", "zstd"):
            if self.backend != "fastwarc":
                yield ReadProblem(
                    path,
                    0,
                    f"{kind.compression}-compressed file: warcio cannot read it; fix: install the "
                    f"warc-fast extra (FastWARC reads it) or decompress it first",
                )
                return
            yield from self._read_file(path, kind)
            return
        if kind.compression == "gzip" and kind.empty:
            yield ReadProblem(path, None, "empty archive: the gzip data holds no records", False)
            return
        if kind.archive_format == "unknown":
            yield ReadProblem(path, 0, "not a WARC or ARC file (no WARC/ or ARC header at the start)")
            return
        if kind.single_stream:
            yield ReadProblem(
                path,
                None,
                f"read as one stream, offsets are uncompressed positions: {RECOMPRESS_HINT}",
                False,
            )
        yield from self._read_file(path, kind)

    def _records(
        self, path: str, kind: FileKind, stream: BinaryIO, base: int, warcio: bool = False
    ) -> Iterator[ArchiveRecord | ReadProblem]:
        """Records of ``stream`` (positioned at ``base``) by the chosen backend (or warcio)."""
        if self.backend == "fastwarc" and kind.archive_format == "warc" and not warcio:
            return self._fastwarc_records(path, stream, base, verify=kind.compression not in ("lz4", "zstd"))
        return self._warcio_records(path, stream, kind.archive_format == "arc")

    def _uses_fastwarc(self, kind: FileKind) -> bool:
        return self.backend == "fastwarc" and kind.archive_format == "warc"

    def _read_file(self, path: str, kind: FileKind) -> Iterator[ArchiveRecord | ReadProblem]:
        """Read, and on damage resynchronise at the next record boundary.

        FastWARC does not tell where a record ends, so at the first damage the
        rest of the file is read by warcio, from the last good record on (records
        already returned are not returned twice): the damage is then located and
        reported the same way whichever backend was chosen.
        """
        with open_archive(path) as raw:
            if kind.single_stream:
                yield from self._read_single_stream(path, kind, raw)
                return
            if kind.compression == "gzip":
                yield from self._read_members(path, kind, raw)
                return
            start = 0
            resyncs = 0
            warcio = False
            last_offset = -1
            while True:
                raw.seek(start)
                self._resume_at = start
                try:
                    for item in self._records(path, kind, raw, start, warcio):
                        if isinstance(item, ArchiveRecord):
                            if item.offset <= last_offset:
                                continue  # returned before the switch to warcio
                            last_offset = item.offset
                        yield item
                    return
                except BaseException as exc:  # many types on damaged input; FastWARC panics (BaseException)
                    _reraise_control_flow(exc)
                    reason = _short_reason(exc)
                    if kind.compression in ("lz4", "zstd"):
                        yield ReadProblem(path, self._resume_at, f"{reason}; the rest of the file is skipped")
                        return
                    if self._uses_fastwarc(kind) and not warcio:
                        warcio = True
                        start = max(last_offset, 0)
                        continue
                    position = self._resume_at  # end of the last record read: the damage starts here
                    # a record may start right where the last good one ended, but never where we began
                    next_start = resync(raw, position if position > start else start + 1, kind)
                    resyncs += 1
                    if next_start is None or resyncs > MAX_RESYNCS:
                        yield ReadProblem(path, position, f"{reason}; no further record found, rest skipped")
                        return
                    lost = next_start - position
                    yield ReadProblem(path, position, f"{reason}; skipped {lost} bytes", skipped=lost > 0)
                    start = next_start

    def _read_members(
        self, path: str, kind: FileKind, raw: BinaryIO
    ) -> Iterator[ArchiveRecord | ReadProblem]:
        """Per-record gzip: parse the verified data of intact members; each damaged stretch is one problem.

        The backend parses a :class:`MemberStream`: for WARC, consecutive intact
        members as one stream (a record may span members); for ARC, one member
        at a time (ARC lengths and separators are unreliable, and warcio reads
        the line after a record as its end marker). A stream ends at damage,
        reported once, and the next starts at the next intact member. After a
        record that cannot be parsed, parsing restarts at the member after the
        one where the last good record began.
        """
        size = raw.seek(0, io.SEEK_END)
        warcio = False
        last: tuple[int, int] = (-1, -1)  # (member offset, position in member) of the last record yielded
        clipped_members: set[int] = set()
        members = scan(raw, size, 0)
        troubles = 0
        while troubles <= MAX_RESYNCS:
            stream = MemberStream(members, one_member=kind.archive_format == "arc")
            note: ReadProblem | None = None  # the last problem the backend reported in this stream
            self._resume_at = 0
            self._record_start = None
            self._place = stream.member_offset
            self._starts_member = stream.starts_member
            try:
                for item in self._records(path, kind, stream, 0, warcio):  # type: ignore[arg-type]
                    if isinstance(item, ReadProblem):
                        note = item
                        yield replace(item, offset=None if item.offset is None else self._place(item.offset))
                        continue
                    found = stream.locate(item.offset)
                    assert found is not None  # the backend parsed the record from a member's data
                    member, into = found
                    if (member.offset, into) <= last:
                        continue  # returned before the switch to warcio
                    last = (member.offset, into)
                    if item.clipped:
                        clipped_members.add(member.offset)
                    yield replace(item, offset=member.offset)
            except BaseException as exc:  # many types on damaged input; FastWARC panics (BaseException)
                _reraise_control_flow(exc)
                troubles += 1
                first = stream.first_member()  # of the last record located, else the stream's first
                if first is None:  # nothing was decompressed: cannot happen, but never loop on it
                    yield ReadProblem(path, None, f"{_short_reason(exc)}; the rest of the file is skipped")
                    return
                if self._uses_fastwarc(kind) and not warcio:
                    warcio = True  # warcio locates the damage; records already returned are not repeated
                    members = scan(raw, size, first.offset)
                    continue
                anchor = None if self._record_start is None else stream.locate(self._record_start)
                restart_after = first if anchor is None else anchor[0]
                member, into = stream.locate(self._resume_at) or (restart_after, 0)
                # members after restart_after are parsed again; the rest of restart_after is lost
                lost = member.size - into if member.offset == restart_after.offset else 0
                if lost == 0 and note is not None and not note.skipped:
                    troubles -= 1  # not damage: the note said it all (a record's end marker is missing)
                    members = scan(raw, size, restart_after.end)
                    continue
                yield ReadProblem(
                    path,
                    member.offset,
                    f"{_short_reason(exc)}; parsing resumes at the next gzip member",
                    skipped=lost > 0,
                )
                if restart_after.end >= size or not restart_after.complete:
                    return
                members = scan(raw, size, restart_after.end)
                continue
            finally:
                stream.close()
                self._place = _same
                self._starts_member = _never
            if stream.truncated is not None and stream.truncated.offset not in clipped_members:
                cut = stream.truncated
                yield ReadProblem(
                    path, cut.offset, f"gzip member truncated at end of file ({cut.size} bytes read)"
                )
                return
            if stream.exhausted or stream.truncated is not None:
                return
            if stream.stopped_by is not None:
                troubles += 1
                yield ReadProblem(path, stream.stopped_by.offset, stream.stopped_by.reason)
        yield ReadProblem(
            path, None, f"more than {MAX_RESYNCS} damaged places; the rest of the file is skipped"
        )

    def _read_single_stream(
        self, path: str, kind: FileKind, raw: BinaryIO
    ) -> Iterator[ArchiveRecord | ReadProblem]:
        """A file gzipped as one stream: read it decompressed; offsets are uncompressed positions."""
        last_offset = -1
        for warcio in (False, True) if self._uses_fastwarc(kind) else (True,):
            raw.seek(0)
            stream = SingleStream(raw)
            try:
                for item in self._records(path, kind, stream, 0, warcio):  # type: ignore[arg-type]
                    if isinstance(item, ArchiveRecord):
                        if item.offset <= last_offset:
                            continue
                        last_offset = item.offset
                    yield item
            except BaseException as exc:
                _reraise_control_flow(exc)
                if not warcio:
                    continue  # FastWARC gave up: warcio reads the rest and reports the damage
                yield ReadProblem(
                    path, stream.tell(), f"{_short_reason(exc)}; the rest of the file is skipped"
                )
            if stream.problem is not None:
                offset, reason = stream.problem
                yield ReadProblem(path, offset, reason)
            return

    def _warcio_records(
        self, path: str, stream: BinaryIO, is_arc: bool
    ) -> Iterator[ArchiveRecord | ReadProblem]:
        iterator = warcio_iterator(stream, is_arc)
        mismatches = iterator.INC_RECORD.found
        for rec in iterator:
            block = rec.raw_stream.read(self.max_block + 1)
            offset = iterator.get_record_offset()  # absolute: warcio starts from stream.tell()
            self._resume_at = offset + iterator.get_record_length()
            self._record_start = offset
            # ARC records have no id: warcio's arc2warc invents a random one, which must not be used
            if not (is_arc and rec.rec_type == "warcinfo"):  # the ARC file header: nothing to fingerprint
                headers = rec.rec_headers
                cut = not is_arc and headers.get_header("Content-Length") is None
                clipped = cut or (len(block) <= self.max_block and (rec.length or 0) > len(block))
                yield ArchiveRecord(
                    file=path,
                    offset=offset,
                    record_type=record_type(rec.rec_type),
                    record_id=None if is_arc else headers.get_header("WARC-Record-ID"),
                    target_uri=clean_uri(headers.get_header("WARC-Target-URI")),
                    date=headers.get_header("WARC-Date") or None,
                    content_type=headers.get_header("Content-Type"),
                    block=block[: self.max_block],
                    truncated=clipped or len(block) > self.max_block or (rec.length or 0) > len(block),
                    archive_format="arc" if is_arc else "warc",
                    clipped=clipped,
                    header_cut=cut,
                    links=None if is_arc else record_links(headers.get_header, clean_uri),
                )
            for where, line in mismatches:
                if self._starts_member(where) and line.startswith(("WARC/", "\x1f")):
                    # its gzip member ends without the blank lines: the line is the next record's start
                    yield ReadProblem(
                        path,
                        where,
                        f"the record at {self._place(offset)} is not followed by blank lines "
                        f"before its gzip member ends",
                        skipped=False,
                    )
                    continue
                yield ReadProblem(
                    path,
                    where,
                    f"the record at {self._place(offset)} is not followed by blank lines "
                    f"(wrong Content-Length?); "
                    f"skipped {len(line)} bytes: {line[:40]!r}",
                )
            mismatches.clear()

    def _fastwarc_records(
        self, path: str, stream: BinaryIO, base: int, verify: bool = True
    ) -> Iterator[ArchiveRecord]:
        """FastWARC's records; with ``verify``, each only once the bytes after it are known to be its end.

        FastWARC silently steps over a wrong Content-Length, stray bytes or
        headers it cannot parse, where warcio reports them. So each record is
        held back until the next one starts exactly after its closing CRLF CRLF
        (or the stream ends there); anything else raises :class:`FramingMismatch`,
        and the caller lets warcio read on from the last record returned.
        """
        from fastwarc.warc import ArchiveIterator, WarcRecordType

        source = Recorder(stream if base == 0 else OffsetStream(stream, base))
        iterator = ArchiveIterator(
            source,
            record_types=WarcRecordType.any_type,
            parse_http=False,
            auto_decode="none",
            fsspec_args=False,
        )
        pending: tuple[ArchiveRecord, int] | None = None  # a record, and where its end marker starts
        for rec in iterator:
            if pending is not None:
                if verify:
                    source.check_end(pending[1], rec.stream_pos)
                yield pending[0]
            block = rec.reader.read(self.max_block + 1)
            headers = rec.headers
            header_bytes = io.BytesIO()
            headers.write(header_bytes)
            self._resume_at = base + rec.stream_pos + 1  # FastWARC does not tell the length
            self._record_start = base + rec.stream_pos
            declared = rec.content_length or 0
            cut = headers.get("Content-Length") is None
            clipped = cut or (len(block) <= self.max_block and declared > len(block))
            record = ArchiveRecord(
                file=path,
                offset=base + rec.stream_pos,  # FastWARC counts from where it started reading
                record_type=record_type(headers.get("WARC-Type")),
                record_id=headers.get("WARC-Record-ID"),
                target_uri=clean_uri(headers.get("WARC-Target-URI")),
                date=headers.get("WARC-Date") or None,
                content_type=headers.get("Content-Type"),
                block=block[: self.max_block],
                truncated=clipped or len(block) > self.max_block or declared > len(block),
                clipped=clipped,
                header_cut=cut,
                links=record_links(headers.get, clean_uri),
            )
            pending = record, rec.stream_pos + len(header_bytes.getvalue()) + declared
        if pending is not None:
            if verify:
                source.check_end(pending[1], None)
            yield pending[0]


def _same(position: int) -> int:
    return position


def _never(position: int) -> bool:
    return False


def _reraise_control_flow(exc: BaseException) -> None:
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)):
        raise exc


def _short_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
