"""Launch-command builders, one module per engine."""
