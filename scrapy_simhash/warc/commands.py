"""``scrapy simhash-tag`` and ``scrapy simhash-dedupe``: the reprocessing commands inside ``scrapy``.

Registered through the ``scrapy.commands`` entry point. Same options, output
and exit status as ``scrapy-simhash tag`` / ``dedupe`` (both call
:mod:`.commandline`); inside a project, ``simhash-tag``'s ``--index`` defaults to the project's
``SIMHASH_INDEX`` (``simhash-dedupe`` uses no index unless given one: a report must not add its pages
to the crawl's index), ``--mode`` and ``--similarity`` to the project's ``SIMHASH_MODE`` and
``SIMHASH_SIMILARITY``, ``--extractor`` to the project's ``SIMHASH_EXTRACTOR`` (with its
``SIMHASH_EXTRACTOR_*`` options), so that an archive is fingerprinted as the crawl fingerprints;
``SIMHASH_EXTRACTOR_MIX = True`` is ``--mix-extractors``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand

from . import commandline


class _ReprocessCommand(ScrapyCommand):
    name: str
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[options] INPUT..."

    index_from_settings = False
    """Whether ``--index`` defaults to the project's ``SIMHASH_INDEX`` (the crawl's index)."""

    def _finish(self, opts: argparse.Namespace) -> argparse.Namespace:
        if not opts.index and self.settings is not None and self.index_from_settings:
            opts.index = self.settings.get("SIMHASH_INDEX") or None
        if self.settings is not None and self.settings.getbool("SIMHASH_EXTRACTOR_MIX"):
            opts.mix_extractors = True  # as the crawl may mix, so may the reprocessing of its archives
        # the crawl's rule (SIMHASH_MODE, SIMHASH_SIMILARITY) unless the command line chose one
        if self.settings is not None and getattr(opts, "method", None) is None:
            if opts.mode is None:
                opts.mode = self.settings.get("SIMHASH_MODE") or None
            if opts.similarity is None and opts.mode != "simhash":
                opts.similarity = self.settings.getfloat("SIMHASH_SIMILARITY") or None
        if self.settings is not None and opts.extractor is None:  # the crawl's extractor, configured
            from ..settings import extractor_from_settings

            opts.extractor = extractor_from_settings(self.settings, opts.max_body_size)
        return opts

    def _run(self, function, opts: argparse.Namespace) -> None:
        try:
            self.exitcode = int(function(self._finish(opts)) or 0)
        except (ValueError, OSError) as exc:
            print(f"scrapy {self.name}: error: {exc}", file=sys.stderr)
            self.exitcode = 2


class TagCommand(_ReprocessCommand):
    name = "simhash-tag"
    index_from_settings = True  # tagging the crawl's archives against the crawl's pages

    def short_desc(self) -> str:
        return "Write sidecar WARCs of simhash metadata records for WARC/ARC files"

    def long_desc(self) -> str:
        return commandline.TAG_DESCRIPTION

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        commandline.add_tag_arguments(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        self._run(commandline.run_tag, opts)


class DedupeCommand(_ReprocessCommand):
    name = "simhash-dedupe"
    # a report: it stores every page it reads in its index, so the crawl's is used only when named (--index)

    def short_desc(self) -> str:
        return "Report near-duplicate clusters across WARC/ARC files"

    def long_desc(self) -> str:
        return commandline.DEDUPE_DESCRIPTION

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        commandline.add_dedupe_arguments(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        self._run(commandline.run_dedupe, opts)
