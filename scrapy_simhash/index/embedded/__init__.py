"""The embedded stores: one SQLite database each (simhash and MinHash), its format, integrity
checks and writer lock, and the sketch column the verified index reads. No server."""
