"""Choice between the C extension and the pure-Python path.

The native path is used when it imports; ``SCRAPY_SIMHASH_BACKEND=python``
(or :func:`set_backend`) forces the pure-Python one, e.g. to test it or on a
platform where a broken build imports but misbehaves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType

from . import _purepy
from .tokenizer import class_table, normalize, tokens


@dataclass(frozen=True)
class Backend:
    """The hot-path functions of one implementation."""

    name: str
    jenkins64: Callable[[bytes], int]
    simhash_features: Callable[[Iterable[str]], int]
    simhash_weighted: Callable[[Iterable[tuple[str, float]]], int]
    simhash_text: Callable[[str], tuple[int, int]]
    """Whole scheme on raw text: ``(simhash of the distinct tokens, token count)``."""


def _from_module(name: str, module: ModuleType, simhash_text: Callable[[str], tuple[int, int]]) -> Backend:
    return Backend(name, module.jenkins64, module.simhash_features, module.simhash_weighted, simhash_text)


def _python_simhash_text(text: str) -> tuple[int, int]:
    found = tokens(text)
    return _purepy.simhash_features(set(found)), len(found)


PYTHON = _from_module("python", _purepy, _python_simhash_text)

try:
    from . import _native
except ImportError:  # not built (no compiler) or built for another interpreter
    NATIVE: Backend | None = None
else:

    def _native_simhash_text(text: str) -> tuple[int, int]:
        # Tokenising in C too: the regex module alone costs more than all the hashing.
        return _native.simhash_text(normalize(text), class_table())

    NATIVE = _from_module("native", _native, _native_simhash_text)


def available() -> list[str]:
    """Names of the backends that can be used here."""
    return ["native", "python"] if NATIVE else ["python"]


def get(name: str = "auto") -> Backend:
    """The backend called ``name``: ``native``, ``python`` or ``auto``."""
    if name == "auto":
        return NATIVE or PYTHON
    if name == "python":
        return PYTHON
    if name == "native":
        if NATIVE is None:
            raise RuntimeError(
                "the native simhash extension is not available (it was not compiled, "
                "or failed to import); reinstall with a C compiler, or use backend 'python'"
            )
        return NATIVE
    raise ValueError(f"unknown backend {name!r}; choose 'native', 'python' or 'auto'")


_current = get(os.environ.get("SCRAPY_SIMHASH_BACKEND", "auto") or "auto")


def current() -> Backend:
    """The backend the module-level functions use."""
    return _current


def set_backend(name: str) -> Backend:
    """Switch the process-wide backend; returns the previous one."""
    global _current
    previous, _current = _current, get(name)
    return previous
