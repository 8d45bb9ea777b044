"""Following a growing cuzk daemon log (layer 2): the incremental reader and the tail from the
importers, the verdict from the analysis, brought together for `workbench follow` and
`wb.follow`."""

from workbench.follow.session import FollowSession, Progress, open_source

__all__ = ["FollowSession", "Progress", "open_source"]
