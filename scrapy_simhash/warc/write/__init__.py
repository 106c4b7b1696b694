"""Writing archives: the crawl's WARC/1.1 files with simhash ``metadata`` records and ``revisit``
records, rolled over by size, and recovery of the files of a crawl that was killed.

:mod:`.crawl` is the Scrapy extension; :mod:`.writer` the files; :mod:`.crawl_revisits` which payloads
are written as references; :mod:`.recover` finishes ``.warc.gz.open`` files. The record values are in
:mod:`scrapy_simhash.warc.records`, shared with the readers of sidecars.
"""
