"""``scrapy-simhash tag`` and ``scrapy-simhash dedupe``: reprocess existing WARC and ARC files.

Only the subcommand registration lives here; arguments, options and the run
functions are in :mod:`scrapy_simhash.warc.commandline`, shared with the
``scrapy simhash-tag`` / ``simhash-dedupe`` commands.

Exit status: 0 when every input was read completely, 1 when the run finished
but some files or records were skipped (each reported on stderr with file,
offset and reason), 2 on a usage or environment error.
"""

from __future__ import annotations

import argparse

from ..warc.commandline import (
    DEDUPE_DESCRIPTION,
    DEDUPE_HELP,
    TAG_DESCRIPTION,
    TAG_HELP,
    add_dedupe_arguments,
    add_tag_arguments,
    run_dedupe,
    run_tag,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    tag = subparsers.add_parser("tag", help=TAG_HELP, description=TAG_DESCRIPTION)
    add_tag_arguments(tag)
    tag.set_defaults(func=run_tag)
    dedupe = subparsers.add_parser("dedupe", help=DEDUPE_HELP, description=DEDUPE_DESCRIPTION)
    add_dedupe_arguments(dedupe)
    dedupe.set_defaults(func=run_dedupe)
