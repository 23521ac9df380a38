"""Hardware probing: the only part that touches the machine."""
