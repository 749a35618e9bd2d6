"""Typed views (pydantic v2) of the three API dialects' conversations.

Every model keeps unknown fields (``extra="allow"``) and remembers the exact dict it was parsed from.
A model no repair touched serializes back to that very dict, so untouched parts of a repaired request
keep their keys, key order and values.
"""
