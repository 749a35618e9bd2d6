"""Request bodies: bytes ↔ JSON ↔ typed conversation (Content-Encoding, fast JSON, byte search, media references)."""
