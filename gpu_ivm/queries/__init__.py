"""Free-variable triangle queries: per-vertex counts (Δ1), per-edge counts (Δ2), triangles (Δ3)."""
