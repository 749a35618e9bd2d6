"""The repairs: one module each, the pipeline that runs them in order (:mod:`.pipeline`), and their shared helpers."""
