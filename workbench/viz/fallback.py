"""What a reopened notebook shows in place of a widget whose kernel is gone.

A widget's model lives in its kernel: reopened, the notebook finds none and says "Error
displaying widget: model not found". So beside each view that matters (the panel's last run)
the notebook keeps a plain HTML output, updated as the view changes, holding a static copy:
the Bokeh document as JSON (inert until needed) and the tables as HTML. It stays hidden while
its widget draws; once the page says the widget's model is not found, a small script shows
the copy in its place, drawing the figure with the BokehJS the notebook already holds
(`wb.setup()` writes it into the notebook). A notebook that is not trusted runs no script and
shows nothing here, as before.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

# Watch the output area this copy sits in: when a widget there reports its model missing
# (what JupyterLab and the classic notebook write), show the copy and draw its figure.
REVEAL_JS = """
(function () {
  const box = document.getElementById("%(id)s");
  if (!box) return;
  const area = box.closest(".jp-OutputArea, .output_area, .output") || box.parentElement;
  // The widget's own message sits alone in an element (this script's text, which names it
  // too, lies in one that holds the script).
  const said = e => e.childElementCount === 0 && !box.contains(e) && /^Error displaying widget/.test(
    (e.textContent || "").trim());
  const missing = () => [...area.querySelectorAll("div")].some(said);
  const reveal = () => {
    box.hidden = false;
    for (const e of area.querySelectorAll("div")) {  // the copy stands in for the error
      if (said(e)) e.style.display = "none";
    }
    const item = box.querySelector("script[type='application/json']");
    const place = box.querySelector(".wb-fallback-figure");
    if (item && place && window.Bokeh && Bokeh.embed) {
      // The copy's document has no kernel behind it: its clicks say so (js/details.js).
      const before = new Set(Bokeh.documents);
      Promise.resolve(Bokeh.embed.embed_item(JSON.parse(item.textContent), place)).then(() => {
        for (const doc of Bokeh.documents) if (!before.has(doc)) doc.wbNoKernel = true;
      });
    } else if (place) {
      place.textContent = "(the figure needs BokehJS: run wb.setup() to draw it again)";
    }
  };
  if (missing()) return reveal();
  const watch = new MutationObserver(() => {
    if (!box.isConnected) watch.disconnect();  // replaced by the next run's copy
    else if (missing()) { watch.disconnect(); reveal(); }
  });
  watch.observe(area, {childList: true, subtree: true, characterData: true});
})();
"""


def fallback_html(html: str, layout: Any = None, note: str = "") -> str:
    """A hidden static copy of a view: `html` (tables, status) and the Bokeh `layout`, shown
    only where the live widget beside it cannot be drawn."""
    element = f"wb-fallback-{uuid.uuid4().hex}"
    figure = ""
    if layout is not None:
        from bokeh.embed import json_item

        item = json.dumps(json_item(layout)).replace("</", "<\\/")  # safe inside a script tag
        figure = f"<div class='wb-fallback-figure'></div><script type='application/json'>{item}</script>"
    said = f"<p class='wb-hint'>{note}</p>" if note else ""
    return (f"<div id='{element}' class='wb-fallback' hidden>{said}{html}{figure}</div>"
            f"<script>{REVEAL_JS % {'id': element}}</script>")
