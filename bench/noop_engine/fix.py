"""llmfix's addons with ``engine.process`` replaced by a no-op, for the bench's ``--addon``: what mitmproxy
dispatching llmfix's hooks costs by itself (the floor under any engine work).

    uv run python bench/run.py --only hist_chat_2k,hist_messages_2k --addon bench/noop_engine
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "addon"))

from llmfix import addons as _llmfix
from llmfix import engine

engine.process = lambda req, settings: engine.Outcome("untouched")  # every request: nothing to do
engine.light = lambda req, settings: True  # and no worker thread

addons = _llmfix.default()
