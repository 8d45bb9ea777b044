"""The model every layer shares: what a pipeline is made of (`pipeline`), how tracks are
named (`tracks`), and what each span is (`roles`).

Start here to find the pipeline: `pipeline.PROVER` is the one description of its phases,
lock, barrier and look-ahead. The runner (pipeline/run.py, pipeline/steps.py) runs it, the
what-if simulator (analysis/replay.py) replays it, the analysis (analysis/tracks.py and what
reads it) takes its phase lists from it, and the golden tests (tests/golden.py) build their
schedules from it.

Pure data and functions over strings and numpy arrays: it imports nothing else of the
workbench at run time (roles names the trace's type for annotations only), so the runner,
the what-if simulator, the analysis, the importers and the views can all read it without
importing one another.
"""
