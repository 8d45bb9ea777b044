"""Subcommands beyond run / summary / export: each module has register(commands)."""
