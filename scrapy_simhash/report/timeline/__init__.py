"""Capture timelines: each URL's captures over time and how its main text changed between them.

:mod:`.model` groups captures by URL and classifies each step; :mod:`.diffs` re-extracts the texts for
word diffs; :mod:`.html` draws the report's "Timelines" section and the one-URL page that
:mod:`.page` (``report --timeline URL``) writes.
"""
