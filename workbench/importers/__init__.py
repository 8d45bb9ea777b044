"""Importers: other tools' records as workbench traces (layer 3).

cuzk daemon logs, nsys SQLite exports and Chrome trace JSON become traces on the
workbench's own tracks, so every analysis and view works on them; `load_any` picks the
importer from the file's contents. What an importer skipped, and why, is in
`trace.meta["import"]`.
"""

from workbench.importers.chrome import load_chrome, parse_chrome
from workbench.importers.cuzk_log import load_cuzk_log, parse_cuzk_log
from workbench.importers.nsys import load_nsys
from workbench.importers.report import ImportFailed, ImportReport
from workbench.importers.sniff import FORMATS, UnknownFormat, load_any, sniff

__all__ = [
    "FORMATS", "ImportFailed", "ImportReport", "UnknownFormat", "load_any", "load_chrome", "load_cuzk_log",
    "load_nsys", "parse_chrome", "parse_cuzk_log", "sniff",
]
