"""scrapy-simhash: near-duplicate detection for Scrapy crawls and WARC archives.

The fingerprint core is imported eagerly (it needs only the standard library); the index,
Scrapy and WARC layers are imported on first use, so ``import scrapy_simhash``
never pulls in Scrapy or numpy by itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .extract import Extraction, Extractor, extract_text
from .fingerprint import (
    SCHEME,
    from_base32,
    from_hex,
    hamming,
    jenkins64,
    set_backend,
    shingle_scheme,
    shingles,
    simhash,
    simhash_features,
    simhash_weighted,
    simhash_with_count,
    similarity,
    to_base32,
    to_hex,
    tokens,
)

__version__ = "0.1.0"

# name -> module, imported on first attribute access
_LAZY = {
    "SimhashIndex": "scrapy_simhash.index",
    "Match": "scrapy_simhash.index",
    "open_index": "scrapy_simhash.index",
    "find_all": "scrapy_simhash.index",
    "clusters": "scrapy_simhash.index",
    "MinHashLSH": "scrapy_simhash.index",
    "MinHashIndex": "scrapy_simhash.index",
    "minhash_pairs": "scrapy_simhash.index",
    "minhash_clusters": "scrapy_simhash.index",
    "compare": "scrapy_simhash.decision",
    "Verdict": "scrapy_simhash.decision",
    "Rule": "scrapy_simhash.decision",
    "fingerprint_page": "scrapy_simhash.page",
    "PageFingerprint": "scrapy_simhash.page",
    "SimhashMiddleware": "scrapy_simhash.middleware",
    "SimhashPipeline": "scrapy_simhash.pipeline",
    "Addon": "scrapy_simhash.addon",
    "MinHash": "scrapy_simhash.fingerprint.minhash",
    "minhash": "scrapy_simhash.fingerprint.minhash",
    "minhash_many": "scrapy_simhash.fingerprint.minhash",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scrapy_simhash' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


if TYPE_CHECKING:  # let type checkers and IDEs see the lazy names
    from .addon import Addon as Addon
    from .decision import Rule as Rule
    from .decision import Verdict as Verdict
    from .decision import compare as compare
    from .fingerprint.minhash import MinHash as MinHash
    from .fingerprint.minhash import minhash as minhash
    from .fingerprint.minhash import minhash_many as minhash_many
    from .index import Match as Match
    from .index import MinHashIndex as MinHashIndex
    from .index import MinHashLSH as MinHashLSH
    from .index import SimhashIndex as SimhashIndex
    from .index import clusters as clusters
    from .index import find_all as find_all
    from .index import minhash_clusters as minhash_clusters
    from .index import minhash_pairs as minhash_pairs
    from .index import open_index as open_index
    from .middleware import SimhashMiddleware as SimhashMiddleware
    from .page import PageFingerprint as PageFingerprint
    from .page import fingerprint_page as fingerprint_page
    from .pipeline import SimhashPipeline as SimhashPipeline

__all__ = [
    "SCHEME",
    "Extraction",
    "Extractor",
    "extract_text",
    "from_base32",
    "from_hex",
    "hamming",
    "jenkins64",
    "set_backend",
    "shingle_scheme",
    "shingles",
    "simhash",
    "simhash_features",
    "simhash_weighted",
    "simhash_with_count",
    "similarity",
    "to_base32",
    "to_hex",
    "tokens",
    *_LAZY,
]
