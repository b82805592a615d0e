"""A mkdocs hook: every figure on a page loads lazily (`<img loading="lazy">`), as it nears the screen.

The results pages show ~20 figures, each drawn twice (a desktop and a phone drawing, one of them hidden by
extra.css at each width): loaded eagerly, a phone fetched all of them, both widths, ~7 MB. Lazily, a browser
fetches a figure only as it scrolls near, and never one that is hidden (`display: none`) at its width.
"""

import re

_IMG = re.compile(r"<img(?![^>]*\sloading=)")


def on_page_content(html, page, config, files):
    return _IMG.sub('<img loading="lazy"', html)
