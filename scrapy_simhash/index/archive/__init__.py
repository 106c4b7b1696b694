"""What an archive needs beyond near-duplicates: payload digests (exact revisits) and the last
capture of each URL (change kinds), embedded or in Redis."""
