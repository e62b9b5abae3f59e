"""A station and its capabilities: identity, wiring of backends, interlocks, locks."""
