"""Prometheus metrics and a health endpoint for llmfix (``--set llmfix_metrics=HOST:PORT``).

labels (bounded label values), families (the metrics, fed by :mod:`llmfix.events`), health (what ``/healthz``
answers), server (the HTTP server on its own thread), addon (the mitmproxy option and lifecycle).
"""
