"""scrapy-simhash on Apache Spark: fingerprint WARC collections and find near-duplicates at scale.

Optional extra ``[spark]`` (pyspark >= 3.5). Nothing in the core imports this package.

Fingerprints are stored in Spark as ``LongType``: the signed two's-complement reading of the
unsigned 64-bit simhash (Spark has no unsigned 64-bit type). :func:`to_signed` and
:func:`to_unsigned` convert; equality, XOR and Hamming distance are the same either way.
"""

from __future__ import annotations

from .archives import fingerprint_archives
from .components import clusters
from .convert import to_signed, to_unsigned
from .pairs import near_duplicates
from .session import spark_session

__all__ = ["clusters", "fingerprint_archives", "near_duplicates", "spark_session", "to_signed", "to_unsigned"]
