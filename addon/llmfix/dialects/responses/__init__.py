"""The Responses API (``POST …/responses``, and its WebSocket): typed models, views, learners, rejections.

Empty on purpose: :mod:`.dialect` assembles the dialect (importing it here would make the neutral views, which
the modules of this folder use, import themselves back)."""
