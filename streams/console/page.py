"""The ops console: one HTML page with a little vanilla JavaScript (no build, no CDN).

The page lives in `streams/console/static/` as the files a front-end person
edits and lints as such (`console.html`, `console.css`, `console.js`),
shipped as package data; this module puts them together once, at import.
Nothing is templated: the page is the same for every worker and every
operator, and everything it shows comes from the JSON API of
`streams.console.api` (so no template engine; see docs/architecture.md, "Libraries,
and what is hand-written on purpose").

The access token the operator types is kept in the tab's sessionStorage and
sent as a Bearer header with every request (reads need it too when the
worker has one); the operator's name is asked once, kept in localStorage,
and sent with every command so the trace says who acted.

The page runs under a Content-Security-Policy that allows exactly its own
inline script and style (by hash, `PAGE_CSP`) and the files its own worker
serves (the vendored bpmn-js viewer and its stylesheets, `'self'`), nothing
loaded from elsewhere, no framing: data shown is always inserted as text,
never as HTML (the diagram's count badges are built as elements too).
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources

from streams.console.diagram import STATIC_PREFIX, VIEWER


def _static(name: str) -> str:
    return (resources.files("streams.console") / "static" / name).read_text(encoding="utf-8")


# Inline, with a newline on each side, so that the page is one response and
# the CSP names exactly these bytes.
STYLE = "\n" + _static("console.css")
BODY = "\n" + _static("console.html")
SCRIPT = "\n" + _static("console.js")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


PAGE = (f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>xwait console</title>\n"
        f'<link rel="stylesheet" href="{STATIC_PREFIX}/diagram-js.css">\n'
        f'<link rel="stylesheet" href="{STATIC_PREFIX}/bpmn-js.css">\n'
        f"<style>{STYLE}</style>\n</head>\n<body>{BODY}"
        f'<script src="{STATIC_PREFIX}/{VIEWER}"></script>\n'
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n")

# Exactly this page's script and style run; it connects only to its own origin.
# 'self': the vendored bpmn-js viewer and its stylesheets, served by the worker itself.
PAGE_CSP = (f"default-src 'none'; script-src {_sha256(SCRIPT)} 'self'; "
            f"style-src {_sha256(STYLE)} 'self'; "
            "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")

__all__ = ["PAGE", "PAGE_CSP"]
