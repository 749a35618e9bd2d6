"""What llmfix remembers between requests: tool calls, in-flight tool-result media, and the learners that feed them.

The interface is :mod:`llmfix.memory.store`; :mod:`~llmfix.memory.sqlite` and
:mod:`~llmfix.memory.media_window` implement it, :mod:`~llmfix.memory.learn` reads calls from traffic.
"""
