"""Build stages and compile records, progress, dumps, profiling ranges, explain."""
