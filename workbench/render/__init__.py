"""Renderers: one module per output format; each returns a value and writes nothing."""
