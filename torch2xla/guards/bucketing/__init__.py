"""Bucketing: pad dynamic dimensions to bucket sizes where the padding analysis proves real results unchanged, and the rewrite that makes them so."""
