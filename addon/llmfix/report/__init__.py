"""What llmfix tells people: change records, console and JSONL log, redaction, mitmweb views, capture-to-fixture."""
