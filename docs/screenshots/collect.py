"""Collect the key views' screenshots from test-artifacts/ (written by the browser tests, see
README.md here) into this folder: cropped to the view and reduced to its 256 most frequent
colours, so that the set stays small and the palette's own colours stay exact (a general
quantiser moved most of them). Run from the repository root after the tests:
python docs/screenshots/collect.py"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
HERE = Path(__file__).resolve().parent
LAB = (290, 0, 1460, 1000)  # a notebook page without its file browser
# name here: (file the test wrote, crop box (left, top, right, bottom) or None for all of it)
SHOTS = {
    "details-after-click.png": ("interrogate-details-partition.png", None),
    "range-statistics-report.png": ("interrogate-range-statistics.png", (0, 0, 1500, 600)),
    "range-statistics-notebook.png": ("notebook-range-statistics.png", LAB),
    "search-partition.png": ("interrogate-search.png", (0, 0, 1500, 400)),
    "flow-arrows.png": ("gantt-legend-case_study.png", None),
    "collapsed-group.png": ("interrogate-collapsed-group.png", (0, 0, 1500, 400)),
    "legend-kernels-grouped.png": ("gantt-legend-case_study.png", (1000, 0, 1440, 520)),
    "far-zoom-span-detail-report.png": ("interrogate-large-report-far-span.png", None),
    "far-zoom-span-detail-notebook.png": ("notebook-far-region.png", LAB),
    "counters-by-unit.png": ("case-study-report.png", (0, 1630, 1500, 2170)),
    "panel-progress-bar.png": ("jupyterlab-panel-running.png", (0, 0, 1100, 395)),
}


def reduced(image: Image.Image) -> Image.Image:
    """The image in its 256 most frequent colours (the flat fills of bars and swatches), every
    other pixel (text's edges) the nearest of them."""
    counts = sorted(image.getcolors(maxcolors=image.width * image.height) or [], reverse=True)[:256]
    flat = [v for _, colour in counts for v in colour]
    palette = Image.new("P", (1, 1))
    palette.putpalette(flat + [0] * (768 - len(flat)))
    return image.quantize(palette=palette, dither=Image.Dither.NONE)


def main() -> int:
    missing = [source for source, _ in SHOTS.values() if not (ARTIFACTS / source).exists()]
    if missing:
        print(f"collect: not in {ARTIFACTS}: {', '.join(sorted(set(missing)))} (run the browser tests first)",
              file=sys.stderr)
        return 2
    total = 0
    for name, (source, box) in SHOTS.items():
        image = Image.open(ARTIFACTS / source).convert("RGB")
        if box is not None:
            box = (box[0], box[1], min(box[2], image.width), min(box[3], image.height))
            image = image.crop(box)
        reduced(image).save(HERE / name, optimize=True)
        size = (HERE / name).stat().st_size
        total += size
        print(f"{name}: {image.width}x{image.height}, {size / 1024:.0f} KiB")
    print(f"total {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
