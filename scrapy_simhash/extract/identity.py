"""An extractor's description read back: name, version, options.

Every fingerprint is stored next to the description of the extractor that made it
(``name/version;option=value;...``, :attr:`~.base.Extractor.description`). Two fingerprints are
comparable when their extractors have the same name and options; the library's version alone
(``trafilatura/2.0.0`` against ``trafilatura/2.0.1``) may change a few texts but not what the
extractor is asked to do, so callers treat it as a warning, not a refusal. This is the one place
that parses a description.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExtractorIdentity:
    """A parsed description. ``options`` keep their order; ``version`` is "" when none was given."""

    name: str
    version: str
    options: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, description: str) -> ExtractorIdentity:
        """``name/version;option=value;...`` (version and options optional); ValueError when malformed."""
        head, *parts = description.strip().split(";")
        name, _, version = head.partition("/")
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"not an extractor description: {description!r}")
        options = []
        for part in parts:
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise ValueError(f"not an extractor description: {description!r} (option {part!r})")
            options.append((key, value))
        return cls(name, version, tuple(options))

    @classmethod
    def read(cls, description: str) -> ExtractorIdentity:
        """:meth:`parse`, where a description that does not parse is a name of its own (never equal to a
        real one): what a stored record says is compared, never refused for its spelling."""
        try:
            return cls.parse(description)
        except ValueError:
            return cls(description, "", ())

    def same_extractor(self, other: ExtractorIdentity) -> bool:
        """Same name and options: fingerprints are comparable, whatever the versions."""
        return self.name == other.name and dict(self.options) == dict(other.options)

    def differences(self, other: ExtractorIdentity) -> str:
        """What differs from ``other``, for a message: ``name a -> b``, ``option x=0 -> 1``, ..."""
        if self.name != other.name:
            return f"name {self.name} -> {other.name}"
        mine, theirs = dict(self.options), dict(other.options)
        changes = [
            f"{key}={mine.get(key, '(unset)')} -> {theirs.get(key, '(unset)')}"
            for key in [*mine, *(k for k in theirs if k not in mine)]
            if mine.get(key) != theirs.get(key)
        ]
        if self.version != other.version:
            changes.append(f"version {self.version or '(unknown)'} -> {other.version or '(unknown)'}")
        return ", ".join(changes)


def other_name(recorded: str, current: str) -> str | None:
    """The name of the ``recorded`` extractor when it is not ``current``'s: the one a run can switch back
    to by its name alone (``--extractor``, ``SIMHASH_EXTRACTOR``); None when only options or versions
    differ."""
    name = ExtractorIdentity.read(recorded).name
    return name if name != ExtractorIdentity.read(current).name else None


def parse_description(description: str) -> ExtractorIdentity:
    """:meth:`ExtractorIdentity.parse`: ``(name, version, options)`` of an extractor's description."""
    return ExtractorIdentity.parse(description)
