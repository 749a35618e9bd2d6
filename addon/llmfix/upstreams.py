"""The upstreams llmfix knows: their built-in profiles (a vendor's per dialect, where its APIs differ); the hosts that
have them are in ``llmfix.hosts``. An unknown host gets ``spec``, the strict reading of the public specs. The texts
and public sources behind each value are in docs/evidence.md.
"""

from __future__ import annotations

from typing import Any

from llmfix.profile import Profile

# Image limits: the texts and their public sources are in docs/evidence.md, "Image limits per upstream".
# Anthropic: ≤ 5 MB per image measured on the base64 string (5242880; a 4 MB screenshot is over it: "image
# exceeds 5 MB maximum: 11641928 bytes > 5242880 bytes"), ≤ 8000 px a side, ≤ 2000 px once a request holds
# more than 20 images ("… for many-image requests: 2000 pixels"), JPEG/PNG/GIF/WebP only (its vision docs,
# lobehub/lobehub #14711, anthropics/claude-code #4778, #49537); the declared media_type is checked against the
# bytes ("Image does not match the provided media type image/png", anthropics/claude-code #6300, #13131, #15746;
# any other type: "…media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", #8184).
_ANTHROPIC_IMAGES: dict[str, Any] = dict(
    image_formats=("jpeg", "png", "gif", "webp"), image_media_type_checked=True, image_max_base64=5_242_880,
    image_max_side=8000, image_many_count=20, image_many_side=2000, image_undecodable_refused=True)
# OpenAI: PNG, JPEG, WebP and non-animated GIF ("You uploaded an unsupported image…" invalid_image_format,
# STranslate/STranslate #277; Codex's view_image of an SVG: "The image data you provided does not represent a valid
# image…", openai/codex #7459). Size: the spec caps a tool output's image_url at 20971520 characters
# (openai/openai-openapi), which, less a data URL's head (``data:image/jpeg;base64,``), leaves 20971496 for its base64:
# stricter than the guide's "20 MB per image" (a mirror, UNCERTAIN), and applied to every image, as the strict reading.
_OPENAI_IMAGES: dict[str, Any] = dict(
    image_formats=("png", "jpeg", "webp", "gif"), image_gif_animated=False, image_max_base64=20_971_496,
    image_undecodable_refused=True)
# xAI: JPEG and PNG only (docs.x.ai, image understanding; a WebP screenshot: "Invalid request content: Downloaded
# response does not contain a valid JPG or PNG image."). Size UNCERTAIN: 10 MiB per an older docs mirror, 20 MiB
# per docs.x.ai; the stricter is taken. Its reported 400 for images under 8×8 px is secondhand: not acted on.
_XAI_IMAGES: dict[str, Any] = dict(image_formats=("jpeg", "png"), image_max_bytes=10 * 1024 * 1024,
                                   image_undecodable_refused=True)
# An upstream llmfix does not know (Gemini's OpenAI-compatible API, Ollama, vLLM, LM Studio, Mistral, Groq, a
# company gateway) is assumed to take the images the client sends: changing an image on a guess loses data, as
# dropping it for a model the catalogue does not know would. Only what no LLM upstream takes is converted,
# losslessly where the format allows (SVG, BMP and TIFF to PNG); an image llmfix cannot read (HEIC, AVIF, a
# truncated file) goes as it is. A gateway in front of Claude or GPT says so in its first rejection of an image
# (retry/rejections.py): it learns that vendor's limits, costs one resend, and is fitted up front from then on.
_ANY_UPSTREAM_IMAGES: dict[str, Any] = dict(image_formats=("jpeg", "png", "gif", "webp"))
_GEMINI_IMAGES: dict[str, Any] = dict(image_formats=("png", "jpeg", "webp", "gif"))
"""An image llmfix cannot read goes as it is: Gemini takes HEIC and HEIF photos, which llmfix does not decode."""
VENDOR_IMAGES: dict[str, dict[str, Any]] = {"image_limits_anthropic": _ANTHROPIC_IMAGES,
                                           "image_limits_openai": _OPENAI_IMAGES}
"""The flags that put a vendor's image limits on a profile, and those limits."""

BUILTIN: dict[str, Profile] = {
    p.name: p
    for p in (
        # An unknown host: the strict reading of the public specs for request shapes, and for images only what no
        # upstream takes (see _ANY_UPSTREAM_IMAGES); a gateway's vendor limits are learned from its rejections.
        Profile(name="spec", **_ANY_UPSTREAM_IMAGES),
        Profile(name="openai", catalogue="openai", **_OPENAI_IMAGES),
        Profile(
            name="xai",
            catalogue="xai",
            responses_tool_output_array=False,
            responses_image_requires_url=True,
            **_XAI_IMAGES,
        ),
        # Thinking mode is on by default for DeepSeek's V4 models (api-docs.deepseek.com thinking_mode): the Chat
        # API then wants each turn's reasoning_content back. Whether a request has it on is not judged: the
        # repair only gives back what the answer carried, and DeepSeek ignores it where it does not need it.
        Profile(name="deepseek", catalogue="deepseek", chat_tool_text_array=False, media_input=False,
                chat_reasoning_content=True),
        # DeepSeek's Messages API reference lists image blocks (base64, url, file) as supported, in user
        # content and in tool_result content: no media_input=false here, no catalogue (its text-only entries
        # describe the Chat API). Mid-conversation system messages: 400. Its compatibility table lists base64 images
        # as JPEG, PNG, GIF and WebP (api-docs.deepseek.com anthropic_api); no size limit is published. Evidence:
        # docs/evidence.md, "Anthropic-compatible vendors".
        Profile(name="deepseek-anthropic", anthropic_system_messages=False,
                image_formats=("jpeg", "png", "gif", "webp"), image_undecodable_refused=True),
        Profile(name="anthropic", catalogue="anthropic", anthropic_signed_thinking=True, learn_refused_fields=False,
                **_ANTHROPIC_IMAGES),
        # A gateway to every vendor's models, Anthropic's among them; it publishes no image limits of its own for
        # inline images (its one known image text is for downloaded ones: 413 "Downloaded image content cannot
        # exceed 30MB", artokun/comfyui-mcp #2221), and relays each vendor's rejection in ``metadata.raw``
        # (LaoshuBaby/liulianmao #11: Anthropic's media-type text): as for an unknown host, the vendor's limits are
        # learned from it. Learned flags are per upstream, not per model: once learned, every model behind it gets
        # the vendor's limits (the stricter; images still go, smaller).
        Profile(name="openrouter", catalogue="openrouter", **_ANY_UPSTREAM_IMAGES),
        # Anthropic-compatible endpoints (docs/evidence.md, "Anthropic-compatible vendors"). The Chat side of these
        # vendors gets the spec reading; only the Messages side has known rejections.
        Profile(name="glm", catalogue="zhipuai"),
        Profile(name="glm-anthropic", catalogue="zhipuai", anthropic_system_messages=False),  # 422
        Profile(name="qwen", catalogue="alibaba"),
        Profile(name="qwen-anthropic", catalogue="alibaba", anthropic_system_messages=False),  # 400
        Profile(name="minimax", catalogue="minimax"),
        Profile(name="minimax-anthropic", catalogue="minimax", anthropic_system_messages=False),  # 400 (2013)
        # Kimi's thinking models (kimi-k2-thinking, K2.5 and later) on its OpenAI-compatible API: 400 ``thinking is
        # enabled but reasoning_content is missing…`` (continuedev/continue #11600, mastra-ai/mastra #12592). UNCERTAIN
        # which models and requests have thinking on; a turn answered without reasoning gave none to restore.
        Profile(name="moonshot", catalogue="moonshotai", chat_reasoning_content=True),
        # Kimi publishes no contract for its Anthropic endpoint; no rejection text is known. Inference: its
        # chat-template backend takes no system turn mid-conversation, like the others; the fold sends what
        # Claude Code itself sends to models without the feature, so it is safe if Kimi would accept them.
        Profile(name="moonshot-anthropic", catalogue="moonshotai", anthropic_system_messages=False),
        # Google Gemini (docs/evidence.md, "Gemini"): the native API on the Gemini API, Vertex and Code Assist, and
        # the Gemini API's OpenAI-compatible door (/v1beta/openai/chat/completions, the Chat variant). Images: PNG,
        # JPEG, WebP (and HEIC/HEIF, which llmfix cannot read and sends as they are); SVG is refused ("Unsupported
        # MIME type: image/svg+xml", google-gemini/gemini-cli #3054), BMP with the generic "Request contains an
        # invalid argument." (google-gemini/gemini-cli #14838). GIF is taken (google/adk-python #5693 tested it;
        # UNCERTAIN in Google's list). Vertex holds one inline file to 7 MB for the Gemini 2.5 and 3 models.
        Profile(name="gemini", catalogue="google", tool_schema_openapi=True, **_GEMINI_IMAGES),
        Profile(name="gemini-openai", catalogue="google", tool_schema_openapi=True, chat_thought_signatures=True,
                **_GEMINI_IMAGES),
        Profile(name="vertex", catalogue="google-vertex", tool_schema_openapi=True, image_max_bytes=7 * 1024 * 1024,
                **_GEMINI_IMAGES),
        Profile(name="code-assist", catalogue="google", tool_schema_openapi=True, **_GEMINI_IMAGES),
    )
}

VARIANTS: dict[str, dict[str, str]] = {
    "deepseek": {"messages": "deepseek-anthropic"},
    "glm": {"messages": "glm-anthropic"},
    "qwen": {"messages": "qwen-anthropic"},
    "minimax": {"messages": "minimax-anthropic"},
    "moonshot": {"messages": "moonshot-anthropic"},
    "gemini": {"chat": "gemini-openai"},
}
"""A vendor's profile per dialect: the upstream is host AND dialect. A ``base`` in the profiles file picks
the variant too, so ``base = "deepseek"`` on a gateway gives ``deepseek-anthropic`` to its Messages requests."""

