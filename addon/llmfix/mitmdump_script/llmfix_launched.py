"""The ``-s`` script the ``llmfix`` launcher (llmfix/cli.py) hands mitmdump: llmfix.addons plus RunInfo.

It lives in a folder of its own because mitmproxy puts a script's folder on ``sys.path`` for good; this
one holds nothing else that could shadow a module. ``llmfix`` itself is imported as installed (the
launcher runs in the environment that has it).
"""

from llmfix import addons as _llmfix
from llmfix.runinfo import RunInfo

addons = [*_llmfix.default(), RunInfo()]
