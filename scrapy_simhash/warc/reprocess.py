"""``tag``: a sidecar WARC of simhash metadata records for each input archive.

Inputs are never modified: ``tag`` writes ``<input>.simhash.warc.gz`` next to
each input (or under ``--out``), first as ``.open``, renamed when the input is
read without loss, so a rerun skips finished inputs and redoes interrupted or damaged ones.
(``dedupe`` lives in :mod:`.dedupe`; both are importable from here.)
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from ..fingerprint import SCHEME
from .dedupe import dedupe, write_report
from .outcome import RunSummary, check_and_add, count_result, duplicate_from, record_key
from .pipeline import (
    FileEnd,
    FileSkipped,
    FileStart,
    FileStats,
    Input,
    Options,
    PageResult,
    Pipeline,
    plan_inputs,
)
from .progress import Progress
from .reader import ReadProblem
from .records import Duplicate, SimhashFields, metadata_record
from .wacz import archive_size
from .writer import WarcFileWriter, base_warcinfo_fields, warcinfo_record

__all__ = ["Options", "dedupe", "plan_inputs", "tag", "write_report"]

# -- tag ---------------------------------------------------------------------------------------------


def sidecar_complete(entry: Input) -> str | None:
    return "sidecar complete" if entry.sidecar.exists() else None


def tag(inputs: list[Input], options: Options, index: Any = None, stream: TextIO | None = None) -> RunSummary:
    """Write a sidecar metadata WARC per input; with ``index``, near-duplicate fields too."""
    progress = Progress(len(inputs), enabled=options.progress, stream=stream)
    summary = RunSummary(mode=options.mode)
    writer: WarcFileWriter | None = None
    current: Input | None = None
    extractor_name = options.extractor.description
    try:
        for event in Pipeline(options, progress).run(inputs, skip=sidecar_complete):
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
                    writer.write(_sidecar_record(current, result, extractor_name, duplicate))
    finally:
        if writer is not None:
            writer.abandon()  # interrupted: the .open file stays, the input is redone next run
        progress.clear()
    summary.seconds = progress.elapsed
    return summary


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
    entry: Input, result: PageResult, extractor_name: str, duplicate: Duplicate | None
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
    )
    if result.record_id:
        return metadata_record(result.uri, fields, refers_to=result.record_id)
    # ARC records have no id: name the capture by URI and date instead
    return metadata_record(result.uri, fields, refers_to_uri=result.uri, refers_to_date=result.date)
