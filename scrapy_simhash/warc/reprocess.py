"""``tag``: a sidecar WARC of simhash metadata records for each input archive.

Inputs are never modified: ``tag`` writes ``<input>.simhash.warc.gz`` next to
each input (or under ``--out``), first as ``.open``, renamed when the input is
read without loss, so a rerun skips finished inputs and redoes interrupted or damaged ones.
(``dedupe`` lives in :mod:`.dedupe`; both are importable from here.)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import replace
from typing import Any, TextIO

from ..fingerprint import SCHEME
from ..index.archive.captures import CaptureStore, EmbeddedCaptures
from .dedupe import dedupe, write_report
from .outcome import RunSummary, check_and_add, count_result, duplicate_from, record_key, relative_file
from .pipeline import FileEnd, FileSkipped, FileStart, FileStats, Options, PageResult, Pipeline
from .progress import Progress
from .read.inputs import Input, plan_inputs
from .read.reader import ReadProblem
from .read.wacz import archive_size
from .records import (
    SOURCE_FILE,
    SOURCE_OFFSET,
    WARC_FIELDS,
    Duplicate,
    SimhashFields,
    TextChange,
    WarcRecord,
    encode_fields,
    metadata_record,
    warc_date,
)
from .revisits import Resolution, Revisit, revisit_pairs
from .timeline import Timeline, capture_of, revisit_capture, text_change
from .write.writer import WarcFileWriter, base_warcinfo_fields, warcinfo_record

__all__ = ["Options", "dedupe", "plan_inputs", "tag", "write_report"]

# -- tag ---------------------------------------------------------------------------------------------


def sidecar_complete(entry: Input) -> str | None:
    return "sidecar complete" if entry.sidecar.exists() else None


def tag(
    inputs: list[Input],
    options: Options,
    index: Any = None,
    stream: TextIO | None = None,
    captures: CaptureStore | None = None,
) -> RunSummary:
    """Write a sidecar metadata WARC per input; with ``index``, near-duplicate fields too.

    Each page's text change since its URL's latest earlier capture (:mod:`.timeline`) is looked up in
    and recorded to ``captures`` (the index's last-capture store; None: a temporary one, so only this
    run's inputs count)."""
    with contextlib.ExitStack() as stack:
        if captures is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="simhash-captures-"))
            captures = EmbeddedCaptures(folder)
            stack.callback(captures.close)
        return _tag(inputs, options, index, stream, Timeline(captures, options.rule))


def _tag(
    inputs: list[Input], options: Options, index: Any, stream: TextIO | None, timeline: Timeline
) -> RunSummary:
    progress = Progress(len(inputs), enabled=options.progress, stream=stream)
    summary = RunSummary(mode=options.mode)
    writer: WarcFileWriter | None = None
    current: Input | None = None
    extractor_name = options.extractor.description
    pipeline = Pipeline(options, progress)
    fingerprints: dict[tuple[str, int], PageResult] = {}
    """Fingerprinted pages, by (file, offset): an original's fingerprint for the revisits of it."""
    with_revisits: list[tuple[Input, FileStats]] = []
    """Inputs whose sidecars are finished once every input is read (their revisits resolved)."""
    revisit_changes: dict[tuple[str, int], TextChange | None] = {}
    """Each revisit's change, found once the file holding it is read (its place in the stream)."""
    sketches = options.rule.verified
    try:
        for event in pipeline.run(inputs, skip=sidecar_complete):
            if isinstance(event, FileSkipped):
                summary.files_skipped_complete += 1
                progress.update(files=1)
            elif isinstance(event, FileStart):
                current = event.input
                writer = _open_sidecar(current, extractor_name)
            elif isinstance(event, ReadProblem):
                summary.add_problem(event, progress)
            elif isinstance(event, FileEnd):
                summary.add_file(event.stats)
                assert writer is not None
                for revisit in pipeline.revisits.revisits.get(str(event.input.path), []):
                    revisit_changes[(revisit.file, revisit.offset)] = _revisit_change(
                        revisit, pipeline.revisits.resolve(revisit), fingerprints, timeline
                    )
                if str(event.input.path) in pipeline.revisits.revisits:
                    writer.abandon()  # reopened for its revisit records once every input is read
                    with_revisits.append((event.input, event.stats))
                else:
                    _finish_sidecar(writer, event.stats, progress)
                writer = None
                progress.update(files=1)
            else:
                assert writer is not None and current is not None
                for result in event:
                    count_result(summary, result)
                    if result.simhash is None:
                        continue
                    progress.update(pages=1)
                    fingerprints[(result.file, result.offset)] = _without_sketch(result)
                    duplicate = None
                    if index is not None:
                        key = record_key(result)
                        found = duplicate_from(
                            check_and_add(index, result),
                            key,
                            relative_to=current.sidecar.parent,
                            record_id=result.record_id,
                        )
                        if found is not None:
                            duplicate = found[1]
                            summary.near_duplicates += 1
                            if duplicate.similarity is None:
                                summary.by_simhash += 1
                    capture = capture_of(result, sketches=sketches)
                    change = None if capture is None else text_change(timeline.observe(capture))
                    writer.write(_sidecar_record(current, result, extractor_name, duplicate, change))
        resolutions = pipeline.revisits.resolve_all()
        summary.revisits.add(pipeline.revisits, [r for found in resolutions.values() for r in found])
        for entry, stats in with_revisits:
            writer = WarcFileWriter(entry.sidecar, mode="ab")
            for resolution in resolutions.get(str(entry.path), []):
                change = revisit_changes.get((resolution.revisit.file, resolution.revisit.offset))
                writer.write(_revisit_record(entry, resolution, fingerprints, extractor_name, change))
            _finish_sidecar(writer, stats, progress)
            writer = None
    finally:
        if writer is not None:
            writer.abandon()  # interrupted: the .open file stays, the input is redone next run
        progress.clear()
    if timeline.error is not None:
        summary.problems.append(
            ReadProblem(
                "last captures",
                None,
                f"{timeline.error}; the pages read after it got no text change",
                skipped=False,
            )
        )
    summary.seconds = progress.elapsed
    return summary


def _revisit_change(
    revisit: Revisit,
    resolution: Resolution,
    fingerprints: dict[tuple[str, int], PageResult],
    timeline: Timeline,
) -> TextChange | None:
    """A revisit placed on its URL's timeline, with the original's fingerprint when it was read."""
    original = resolution.original
    page = None if original is None else fingerprints.get((original.file, original.offset))
    seen = revisit_capture(revisit, None if page is None else capture_of(page))
    return None if seen is None else text_change(timeline.observe(seen))


def _finish_sidecar(writer: WarcFileWriter, stats: FileStats, progress: Progress) -> None:
    """Finalise the sidecar only when every record of the input was read.

    A finalised sidecar makes the next run skip the input, so after any lost
    data (a damaged gzip member, a clipped record, an unreadable stretch) it
    stays ``.open``: the run exits 1 and the next run reads the input again.
    """
    if not stats.skipped:
        writer.close()
    elif stats.records == 0:
        writer.discard()  # nothing read at all (e.g. unreadable compression): nothing worth keeping
    else:
        writer.abandon()
        progress.message(
            f"note: {writer.open_path} left unfinished: records of its input were lost; "
            f"the next run reads the input again"
        )


def _open_sidecar(entry: Input, extractor_name: str) -> WarcFileWriter:
    entry.sidecar.parent.mkdir(parents=True, exist_ok=True)
    writer = WarcFileWriter(entry.sidecar, mode="wb")
    source = _source(entry)
    fields = base_warcinfo_fields(
        [
            (
                "description",
                f"simhash metadata for the records of {source}; offsets are positions in that file",
            ),
            ("source-file", source),
            ("source-size", str(archive_size(entry.path))),
            ("simhash-scheme", SCHEME),
            ("text-extractor", extractor_name),
        ]
    )
    writer.write(warcinfo_record(entry.sidecar.name, fields))
    return writer


def _source(entry: Input) -> str:
    return entry.source or os.path.relpath(entry.path, entry.sidecar.parent)


def _sidecar_record(
    entry: Input,
    result: PageResult,
    extractor_name: str,
    duplicate: Duplicate | None,
    change: TextChange | None = None,
) -> Any:
    assert result.simhash is not None
    fields = SimhashFields(
        simhash=result.simhash,
        tokens=result.tokens,
        extractor=extractor_name,
        duplicate=duplicate,
        source_file=_source(entry),
        source_offset=result.offset,
        minhash=result.minhash,
        change=change,
    )
    if result.record_id:
        return metadata_record(result.uri, fields, refers_to=result.record_id)
    # ARC records have no id: name the capture by URI and date instead
    return metadata_record(result.uri, fields, refers_to_uri=result.uri, refers_to_date=result.date)


def _without_sketch(result: PageResult) -> PageResult:
    """What a revisit's sidecar record copies from its original (not its sketch: memory stays small)."""
    return replace(result, minhash=None) if result.minhash is not None else result


def _revisit_record(
    entry: Input,
    resolution: Resolution,
    fingerprints: dict[tuple[str, int], PageResult],
    extractor_name: str,
    change: TextChange | None = None,
) -> WarcRecord:
    """The sidecar record of an identical-payload revisit: ``revisit-*`` fields naming its original; when
    the original is a fingerprinted page, also its fingerprint and ``near-duplicate-*`` fields with
    distance 0 and similarity 1 (an exact duplicate), so readers of sidecars see the pair."""
    revisit, original = resolution.revisit, resolution.original
    original_file = None if original is None else relative_file(original.file, entry.sidecar.parent)
    if original is not None and entry.source and original.file == str(entry.path):
        original_file = entry.source
    page = None if original is None else fingerprints.get((original.file, original.offset))
    pairs: list[tuple[str, str]] = []
    if original is not None and page is not None and page.simhash is not None:
        exact = Duplicate(
            record_id=original.record_id,
            uri=original.uri,
            date=original.date,
            distance=0,
            file=original_file,
            offset=original.offset,
            similarity=1.0,
        )
        fields = SimhashFields(
            simhash=page.simhash,
            tokens=page.tokens,
            extractor=extractor_name,
            duplicate=exact,
            source_file=_source(entry),
            source_offset=revisit.offset,
        )
        pairs = fields.to_pairs()
    else:
        pairs = [(SOURCE_FILE, _source(entry)), (SOURCE_OFFSET, str(revisit.offset))]
    pairs += revisit_pairs(resolution, original_file)
    if change is not None:
        pairs += change.to_pairs()
    headers: list[tuple[str, str]] = []
    if revisit.uri:
        headers.append(("WARC-Target-URI", revisit.uri))
    headers.append(("WARC-Date", warc_date()))
    if revisit.record_id:
        headers.append(("WARC-Refers-To", revisit.record_id))
    headers.append(("Content-Type", WARC_FIELDS))
    return WarcRecord("metadata", headers, encode_fields(pairs))
