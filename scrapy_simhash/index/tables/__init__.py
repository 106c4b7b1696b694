"""The simhash tables: Manku permuted tables (layouts, sorted arrays, in-memory layers, the manifest)
and the batch mode over an array. Pure computation over numpy: no storage, no server."""
