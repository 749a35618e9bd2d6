"""llmfix's mitmproxy addons, in the order mitmproxy must call them: every entry script loads this one list.

``LLMFix`` (the request hooks, the learners) comes first; ``Retry`` acts on its answers (repair-and-retry);
``ResponsesWebSocket`` carries the Responses API's WebSocket messages through the same engine; ``Capture`` turns
flows into fixtures; ``Metrics`` serves Prometheus metrics and a health check when ``llmfix_metrics`` is
set. ``addon/fix.py``, the launcher's script and the bench's no-op engine all load
:func:`default`, so none of them can drift from another (the launcher once ran without repair-and-retry).
"""

from __future__ import annotations

from typing import Any

from llmfix.metrics.addon import Metrics
from llmfix.proxy import LLMFix
from llmfix.report.capture import Capture
from llmfix.retry.addon import Retry
from llmfix.websocket import ResponsesWebSocket


def default() -> list[Any]:
    fix = LLMFix()
    return [fix, Retry(fix), ResponsesWebSocket(fix), Capture(), Metrics()]
