"""torch <-> JAX arrays, XLA programs and their calls, output packing, runtime checks, the persistent records of whole signatures."""
