"""The C extension whose build needs a path known only at build time: lxml's headers.

Every other extension is declared in pyproject.toml (``[tool.setuptools] ext-modules``); setuptools
adds them to this one. ``scrapy_simhash.extract._template_walk`` reads lxml's trees through lxml's
public C API, so it is compiled against the lxml that pyproject's ``build-system.requires`` installs.
It is optional like the others: without a compiler (or lxml's headers) the template step walks in
Python, with the same answers.
"""

from setuptools import Extension, setup


def _lxml_include_dirs() -> list[str]:
    try:
        import lxml
    except ImportError:
        return []
    return list(lxml.get_include())


_INCLUDE = _lxml_include_dirs()

setup(
    ext_modules=[
        Extension(
            "scrapy_simhash.extract._template_walk",
            sources=["scrapy_simhash/extract/_template_walk.c"],
            include_dirs=_INCLUDE,
            optional=True,
        )
    ]
    if _INCLUDE
    else []
)
