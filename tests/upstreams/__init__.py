"""Strict mock LLM upstreams for tests: the rules real upstreams enforce, and a server applying them."""
