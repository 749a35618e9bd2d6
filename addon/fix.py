"""mitmproxy entry point: ``mitmdump -s addon/fix.py``. All logic lives in the llmfix package."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from llmfix import addons as _llmfix  # noqa: E402

addons = _llmfix.default()
