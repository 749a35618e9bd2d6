"""Where :func:`llmfix.engine.process` runs: on the event loop, in a worker thread, or on the image workers.

A large body (or every body, with a network memory) is processed in a thread of asyncio's default executor
(``asyncio.to_thread``), which every flow shares. Image work — a decode or a conversion, tens to hundreds of
milliseconds each, at most :data:`llmfix.images.WORKERS` at once — never runs there, nor on the event loop: the
engine answers ``deferred`` for a request that needs it, and the request is run again on :data:`IMAGE_WORKERS`,
threads of llmfix's own. So eight new screenshots queue behind each other, never in front of a plain request
(before, they held the shared threads while they waited for their turn to decode: a 3 ms request waited 1.6 s).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from llmfix import engine, images

IMAGE_WORKERS = ThreadPoolExecutor(max_workers=images.WORKERS, thread_name_prefix="llmfix-images")


async def process(req: engine.Request, settings: engine.Settings, *, offload: bool) -> engine.Outcome:
    """``engine.process`` of ``req``: in a thread of the shared pool when ``offload`` (else on the event loop), and
    again on the image workers when that run found image work to do."""
    if offload:
        outcome = await asyncio.to_thread(images.deferring, engine.process, req, settings)
    else:
        outcome = engine.process(req, settings)
    if outcome.status == "deferred":
        outcome = await asyncio.get_running_loop().run_in_executor(IMAGE_WORKERS, engine.process, req, settings)
    return outcome
