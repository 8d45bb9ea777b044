"""The model every layer shares: what a pipeline is made of (`pipeline`), how tracks are
named (`tracks`), and what each span is (`roles`).

Pure data and functions over strings and numpy arrays: it imports nothing else of the
workbench, so the runner, the what-if simulator, the analysis, the importers and the views
can all read it without importing one another.
"""
