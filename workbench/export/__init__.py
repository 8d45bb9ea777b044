"""Exporters: a trace in, another format's text or object out. Callers do the writing."""
