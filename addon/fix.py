"""mitmproxy entry point: ``mitmdump -s addon/fix.py``. All logic lives in the llmfix package."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from llmfix.proxy import LLMFix  # noqa: E402
from llmfix.report.capture import Capture  # noqa: E402
from llmfix.retry.addon import Retry  # noqa: E402
from llmfix.websocket import ResponsesWebSocket  # noqa: E402

_fix = LLMFix()
addons = [_fix, Retry(_fix), ResponsesWebSocket(_fix), Capture()]
