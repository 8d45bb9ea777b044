"""Views: Bokeh figures and ipywidgets built from traces and analysis output.

Figures and the report return objects or strings; only notebook helpers and the CLI display
or write them. Bokeh is an optional extra, imported here so that a missing install fails at
once with the name of the extra to install, not deep inside a figure.
"""

from workbench.viz.deps import require

require("bokeh")
