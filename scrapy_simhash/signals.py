"""Scrapy signals sent by scrapy-simhash.

``fingerprint_computed``: sent by :class:`~scrapy_simhash.SimhashMiddleware`
for every response it fingerprinted, with ``response``, ``request``,
``result`` (the dict it also puts in ``response.meta["simhash"]``) and
``spider``. The WARC writer listens to it to write ``metadata`` records.
"""

fingerprint_computed = object()
