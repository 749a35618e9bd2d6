"""Repair-and-retry: recognise an upstream's rejection, learn the profile flag that avoids it, resend once.

- :mod:`llmfix.retry.rejections` — the table: (dialect, status, error text) → the flags that avoid it.
- :mod:`llmfix.retry.learned` — learned quirks in memory, over a :class:`~llmfix.memory.store.QuirkStore`.
- :mod:`llmfix.retry.decide` — what a rejection teaches and the repaired request to resend, whatever the
  transport: the HTTP resend below and a WebSocket's use the same decision.
- :mod:`llmfix.retry.addon` — the mitmproxy side: option ``llmfix_retry``, the resend, commands.
"""
