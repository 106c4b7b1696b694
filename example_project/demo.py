"""Placeholder demo: fingerprints two versions of one article and compares them.

Replaced by the demo crawl once the Scrapy integration lands.
"""

from scrapy_simhash import hamming, simhash, to_base32
from scrapy_simhash.extract import extract_text

BODY = "".join(
    f"<p>Paragraph {i}: the harbour master counted {i * 3} boats before the storm reached the coast.</p>"
    for i in range(15)
)
ORIGINAL = f"<html><body><nav>Home News</nav><article>{BODY}</article></body></html>"
PRINT_VIEW = f"<html><body><header>Print this page</header><article>{BODY}</article></body></html>"

a = simhash(extract_text(ORIGINAL) or "")
b = simhash(extract_text(PRINT_VIEW) or "")
print(f"original   {to_base32(a)}")
print(f"print view {to_base32(b)}")
print(f"distance   {hamming(a, b)} bits -> {'near-duplicate' if hamming(a, b) <= 3 else 'different'}")
