"""The core: SBUF, per-engine controllers and the top level."""
