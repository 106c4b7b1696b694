"""MinHash-LSH in memory: bands of a sketch, buckets, the immutable segments, the batch mode.
The embedded and Redis MinHash stores are built on it."""
