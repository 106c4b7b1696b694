"""The ``SIMHASH_*`` Scrapy settings, parsed and checked in one place.

Every component reads its configuration through :class:`SimhashSettings`, so
a wrong value fails at start-up with a message naming the setting, not in the
middle of a crawl.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from . import defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from .decision import Rule
    from .extract import Extractor

DEFAULTS: dict[str, object] = {
    "SIMHASH_ENABLED": True,
    "SIMHASH_MODE": defaults.MODE,
    "SIMHASH_DISTANCE": defaults.DISTANCE,
    "SIMHASH_SIMILARITY": defaults.SIMILARITY,
    "SIMHASH_ACTION": "tag",
    "SIMHASH_INDEX": None,
    "SIMHASH_RESET": False,
    "SIMHASH_INDEX_SYNC": "normal",
    "SIMHASH_MIN_TOKENS": defaults.MIN_TOKENS,
    "SIMHASH_CONTENT_TYPES": ["text/html", "application/xhtml+xml"],
    "SIMHASH_WORKERS": None,
    "SIMHASH_TIMEOUT": 30.0,
    "SIMHASH_MAX_BODY_SIZE": 8 * 1024 * 1024,
    "SIMHASH_EXTRACTOR": None,
    "SIMHASH_EXTRACTOR_FAST": True,
    "SIMHASH_EXTRACTOR_FAVOR_PRECISION": False,
    "SIMHASH_EXTRACTOR_FAVOR_RECALL": False,
    "SIMHASH_EXTRACTOR_TABLES": True,
    "SIMHASH_EXTRACTOR_FALLBACK": "none",
    "SIMHASH_EXTRACTOR_MIX": False,
    "SIMHASH_ON_INDEX_ERROR": "continue",
    "SIMHASH_INDEX_RETRY_AFTER": 5.0,
    "SIMHASH_ITEM_FIELD": None,
    "SIMHASH_ITEM_ACTION": "tag",
    "SIMHASH_REPORT": None,
    "SIMHASH_KEEP": "preferred",
    "SIMHASH_TRACKING_PARAMS": [],
}

_ACTIONS = ("tag", "drop")
_RESPONSE_ACTIONS = (*_ACTIONS, "drop_unchanged")

_TRAFILATURA_OPTIONS = {
    "SIMHASH_EXTRACTOR_FAST": "fast",
    "SIMHASH_EXTRACTOR_FAVOR_PRECISION": "favor_precision",
    "SIMHASH_EXTRACTOR_FAVOR_RECALL": "favor_recall",
    "SIMHASH_EXTRACTOR_TABLES": "include_tables",
    "SIMHASH_EXTRACTOR_FALLBACK": "fallback",
}
"""The settings that configure the trafilatura extractor, and its option each one sets."""


class SimhashConfigError(ValueError):
    """A ``SIMHASH_*`` setting is wrong, or the crawl's index cannot honour it. Retrying cannot help:
    the crawl refuses to start, with this message (which names the setting to change)."""


def _choice(settings: BaseSettings, name: str, choices: tuple[str, ...]) -> str:
    value = str(settings.get(name, DEFAULTS[name])).lower()
    if value not in choices:
        raise SimhashConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _number(settings: BaseSettings, name: str, low: float, high: float | None = None) -> float:
    raw = settings.get(name, DEFAULTS[name])
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SimhashConfigError(f"{name} must be a number; got {raw!r}") from None
    if value != value:  # NaN passes every comparison below
        raise SimhashConfigError(f"{name} must be a number; got {raw!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise SimhashConfigError(f"{name} must be {bound}; got {raw!r}")
    return value


def extractor_from_settings(settings: BaseSettings, max_bytes: int) -> Extractor:
    """``SIMHASH_EXTRACTOR`` (the registry's default when unset), with ``max_bytes`` and, for
    trafilatura, the ``SIMHASH_EXTRACTOR_*`` options.

    Those options configure trafilatura only: set to anything but their default with another
    extractor they would be silently ignored, so the crawl refuses to start instead.
    """
    from .extract.registry import DEFAULT_NAME, extractor_names, get_extractor

    name = str(settings.get("SIMHASH_EXTRACTOR") or DEFAULT_NAME).strip().lower()
    if name not in extractor_names():
        raise SimhashConfigError(
            f"SIMHASH_EXTRACTOR must name a registered extractor ({', '.join(extractor_names())}); "
            f"got {settings.get('SIMHASH_EXTRACTOR')!r}"
        )
    fallback = _choice(settings, "SIMHASH_EXTRACTOR_FALLBACK", ("none", "visible"))
    values: dict[str, object] = {
        setting: settings.getbool(setting, bool(DEFAULTS[setting]))
        for setting in _TRAFILATURA_OPTIONS
        if setting != "SIMHASH_EXTRACTOR_FALLBACK"
    }
    values["SIMHASH_EXTRACTOR_FALLBACK"] = fallback
    options: dict[str, object] = {"max_bytes": max_bytes}
    if name == "trafilatura":
        options.update({_TRAFILATURA_OPTIONS[setting]: value for setting, value in values.items()})
    else:
        changed = [setting for setting, value in values.items() if value != DEFAULTS[setting]]
        if changed:
            raise SimhashConfigError(
                f"{', '.join(changed)} configure{'s' if len(changed) == 1 else ''} the trafilatura "
                f"extractor only, and SIMHASH_EXTRACTOR is {name!r}: remove "
                f"{'it' if len(changed) == 1 else 'them'}, or set SIMHASH_EXTRACTOR = 'trafilatura'"
            )
    try:
        return get_extractor(name, **options)
    except ImportError as exc:  # an extractor whose library is not installed
        raise SimhashConfigError(f"SIMHASH_EXTRACTOR = {name!r} cannot be used: {exc}") from None


def _similarity(settings: BaseSettings) -> float:
    """In (0, 1]: 0 would call every candidate a near-duplicate (Rule refuses it too)."""
    value = _number(settings, "SIMHASH_SIMILARITY", 0, 1)
    if value == 0:
        raw = settings.get("SIMHASH_SIMILARITY")
        raise SimhashConfigError(f"SIMHASH_SIMILARITY must be above 0 and at most 1; got {raw!r}")
    return value


@dataclass(frozen=True)
class SimhashSettings:
    """Typed view of the ``SIMHASH_*`` settings."""

    enabled: bool
    mode: str
    """``verified`` (sketch-verified decisions, the default) or ``simhash`` (distance alone, no sketch)."""
    distance: int
    """Simhash mode's threshold, and verified mode's for pages without a sketch."""
    similarity: float
    """Verified mode: the estimated Jaccard similarity a candidate needs to be a near-duplicate."""
    action: str
    index: str | None
    reset: bool
    index_sync: str
    min_tokens: int
    content_types: tuple[str, ...]
    workers: int
    timeout: float
    max_body_size: int
    extractor: Extractor
    on_index_error: str
    index_retry_after: float
    """Seconds pages pass untagged after an index outage before one page tries the index again."""
    item_field: str | None
    item_action: str
    extractor_mix: bool = False
    """Let the crawl store pages in an index that records another extractor (name or options)."""
    keep: str = "preferred"
    """Which copy is a cluster's original: ``preferred`` (:mod:`.preferred`) or the ``first`` fetched."""
    tracking_params: tuple[str, ...] = ()
    """Query parameters counted as tracking besides :data:`~.preferred.DEFAULT_TRACKING_PARAMS`."""

    @property
    def verified(self) -> bool:
        return self.mode == "verified"

    @property
    def rule(self) -> Rule:
        """The decision rule these settings ask for (the one the crawl's index applies)."""
        from .decision import Rule

        return Rule(mode=self.mode, distance=self.distance, similarity=self.similarity)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SimhashSettings:
        workers_raw = settings.get("SIMHASH_WORKERS", DEFAULTS["SIMHASH_WORKERS"])
        if workers_raw in (None, ""):
            workers = os.cpu_count() or 1
        else:
            workers = int(_number(settings, "SIMHASH_WORKERS", 0))
        max_body = int(_number(settings, "SIMHASH_MAX_BODY_SIZE", 1))
        content_types = settings.getlist(
            "SIMHASH_CONTENT_TYPES", cast("list[str]", DEFAULTS["SIMHASH_CONTENT_TYPES"])
        )
        return cls(
            enabled=settings.getbool("SIMHASH_ENABLED", True),
            mode=_choice(settings, "SIMHASH_MODE", defaults.MODES),
            distance=int(_number(settings, "SIMHASH_DISTANCE", 0, 8)),
            similarity=_similarity(settings),
            action=_choice(settings, "SIMHASH_ACTION", _RESPONSE_ACTIONS),
            index=settings.get("SIMHASH_INDEX") or None,
            reset=settings.getbool("SIMHASH_RESET", False),
            index_sync=_choice(settings, "SIMHASH_INDEX_SYNC", ("normal", "full")),
            min_tokens=int(_number(settings, "SIMHASH_MIN_TOKENS", 0)),
            content_types=tuple(c.strip().lower() for c in content_types if c.strip()),
            workers=workers,
            timeout=_number(settings, "SIMHASH_TIMEOUT", 0.001),
            max_body_size=max_body,
            extractor=extractor_from_settings(settings, max_body),
            on_index_error=_choice(settings, "SIMHASH_ON_INDEX_ERROR", ("continue", "stop")),
            index_retry_after=_number(settings, "SIMHASH_INDEX_RETRY_AFTER", 0),
            item_field=settings.get("SIMHASH_ITEM_FIELD") or None,
            item_action=_choice(settings, "SIMHASH_ITEM_ACTION", _ACTIONS),
            extractor_mix=settings.getbool("SIMHASH_EXTRACTOR_MIX", False),
            keep=_choice(settings, "SIMHASH_KEEP", ("preferred", "first")),
            tracking_params=tuple(
                name.strip().lower()
                for name in settings.getlist("SIMHASH_TRACKING_PARAMS", [])
                if name.strip()
            ),
        )
