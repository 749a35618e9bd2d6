"""The ``-s`` script the ``llmfix`` launcher (llmfix/cli.py) hands mitmdump: addon/fix.py's addons plus RunInfo.

It lives in a folder of its own because mitmproxy puts a script's folder on ``sys.path`` for good; this
one holds nothing else that could shadow a module. ``llmfix`` itself is imported as installed (the
launcher runs in the environment that has it).
"""

from llmfix.proxy import LLMFix
from llmfix.report.capture import Capture
from llmfix.runinfo import RunInfo
from llmfix.websocket import ResponsesWebSocket

_fix = LLMFix()
addons = [_fix, ResponsesWebSocket(_fix), Capture(), RunInfo()]
