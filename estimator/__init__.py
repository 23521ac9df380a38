"""Pure sizing core: typed inputs in, typed results out; no I/O."""
