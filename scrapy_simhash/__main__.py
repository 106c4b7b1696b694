"""``python -m scrapy_simhash``: the ``scrapy-simhash`` command, for where its console script is not on
``PATH`` (or to pick the interpreter explicitly)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
