"""llmfix: repairs LLM API request bodies in flight, as a mitmproxy addon.

The mitmproxy entry point is ``addon/fix.py``; the addon class is :class:`llmfix.proxy.LLMFix`.
"""
