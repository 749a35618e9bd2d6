"""What an upstream accepts, as flags and limits that repairs read (never host names): :class:`Profile`.

Which profile an upstream has is :mod:`llmfix.profiles`' (the built-in ones are :mod:`llmfix.upstreams`'); the
evidence for each flag is in docs/evidence.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from llmfix.images.shape import FORMATS

IMAGE_FORMATS = FORMATS
"""The image formats a profile may name: those llmfix's image module reads."""
_ALIASES = {"jpg": "jpeg", "svg+xml": "svg", "tif": "tiff"}


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    catalogue: str | None = None
    """The models.dev provider id used to look up a model's input modalities."""
    responses_tool_output_array: bool = True
    """May a Responses ``function_call_output``/``custom_tool_call_output`` output be an array (OpenAI yes, xAI no)."""
    responses_image_requires_url: bool = False
    """Must every Responses ``input_image`` carry an ``image_url`` (xAI: file_id only is rejected)."""
    chat_tool_media: bool = False
    """May a Chat ``role:"tool"`` message carry image/file/audio parts (OpenAI, DeepSeek: no)."""
    chat_tool_text_array: bool = True
    """May a Chat tool message's content be an array of text parts (OpenAI) rather than only a string (DeepSeek)."""
    anthropic_tool_result_media: bool = True
    """May an Anthropic ``tool_result`` carry image blocks (Anthropic docs)."""
    media_input: bool = True
    """May a request carry image/file parts at all. False: every model is text-only, whatever the catalogue
    says or does not know (DeepSeek answers ``unknown variant `image_url`, expected `text``` for any
    model), unless a profiles-file ``input`` names its modalities."""
    anthropic_system_messages: bool = True
    """May an Anthropic ``messages[]`` entry have ``role:"system"`` (mid-conversation system messages, sent by Claude
    Code since 2.1.154). False: folded into user messages (DeepSeek 400 ``unknown variant `system` ``, GLM 422 ``Input
    should be 'user' or 'assistant'``, MiniMax 400 ``(2013)``; docs/evidence.md, "Anthropic-compatible vendors")."""
    chat_reasoning_content: bool = False
    """Must a Chat assistant turn be replayed with the ``reasoning_content`` it was answered with (thinking mode;
    docs/evidence.md, "Reasoning and thinking replay": DeepSeek 400 ``The `reasoning_content` in the thinking mode
    must be passed back to the API.``, Kimi 400 ``thinking is enabled but reasoning_content is missing in assistant
    tool call message at index N``). True: restore-reasoning-content gives it back from memory where it was lost."""
    anthropic_signed_thinking: bool = False
    """Does the upstream verify the ``signature`` of every thinking block against its own (Anthropic:
    ``messages.N.content.M: Invalid `signature` in `thinking` block``, anthropics/anthropic-sdk-python #1598).
    True: blocks whose form shows they are not its own (no or an empty signature, a message-UUID signature) leave
    the older turns up front; a rejection naming a block teaches the rest on any upstream (drop-foreign-thinking)."""
    learn_refused_fields: bool = True  # strip-refused-fields; not Anthropic's: its refusals depend on model and beta
    gemini_thought_signatures: bool = False
    """Must the first ``functionCall`` of each step of a Gemini request's current turn carry the thought signature the
    model issued with it, whatever the model's name (Gemini 3: ``Function call is missing a thought_signature in
    functionCall parts.``; docs/evidence.md, "Gemini"). True: restore-thought-signatures gives it back from memory,
    else Google's documented dummy. Without it the repair still acts for a model named gemini-3 or later."""
    chat_thought_signatures: bool = False
    """Must the first tool call of each assistant message of a Chat request's current turn (after its last user
    message) carry, as ``extra_content.google.thought_signature``, the thought signature Gemini issued with it
    (Gemini's OpenAI-compatible door: the Gemini API's ``Function call is missing a thought_signature in
    functionCall parts.``, list-wrapped). True: restore-tool-call-signatures gives each call of the current turn the
    signature it came with, from memory, else Google's documented dummy on the first call of each message."""
    gemini_tool_result_media: bool = True
    """May a Gemini ``functionResponse`` carry media in its ``parts`` (Gemini 3; Gemini 2.5 answers ``Multimodal
    function responses are not supported for this model``)."""
    tool_schema_openapi: bool = False
    """Are tool ``parameters`` held to Gemini's ``Schema``, a subset of OpenAPI 3.0 (``Invalid JSON payload
    received. Unknown name "$schema" at 'tools[0].function_declarations[3].parameters': Cannot find field.``): Gemini's
    own doors, and a gateway that answered so. True: fit-tool-schemas fits the declarations it refuses."""
    # -- images (fit-images): what one inline image may be; None / a missing value: no such limit -----------
    image_formats: tuple[str, ...] | None = None
    """The image formats taken as they are (``jpeg``, ``png``, ``gif``, ``webp``, ``bmp``, ``tiff``, ``svg``); another
    is converted (an SVG rasterized). None: any format."""
    image_gif_animated: bool = True
    """May a GIF be animated. False: its first frame is sent as a still (OpenAI: "non-animated GIF")."""
    image_media_type_checked: bool = False
    """Does the upstream check an image's declared type against its bytes (Anthropic: 400 ``Image does not match
    the provided media type image/png``). True: a mislabelled image gets its true type."""
    image_undecodable_refused: bool = False
    """Does the upstream refuse an image it cannot decode (Anthropic ``Could not process image``, OpenAI ``The image
    data you provided does not represent a valid image``). True: an image llmfix cannot decode either becomes a
    placeholder, and every pixel of an image is checked. False: llmfix reads only the headers of images that fit,
    and one it cannot read (a HEIC or AVIF photo, which some upstreams take) is sent as it is."""
    image_limits_anthropic: bool = False
    """Does the upstream hold images to Anthropic's limits (a gateway in front of Claude). True: they apply on top
    of this profile's own image limits, the stricter of each. Learned from Anthropic's rejection texts."""
    image_limits_openai: bool = False
    """Does the upstream hold images to OpenAI's limits (a gateway in front of GPT). True: as for Anthropic's."""
    image_max_base64: int | None = None
    """Characters of base64 text one image may take (Anthropic measures its 5 MB there: 5242880)."""
    image_max_bytes: int | None = None
    """Bytes one image may take once decoded from base64."""
    image_max_side: int | None = None
    """Pixels one image may have on its long side."""
    image_many_count: int | None = None
    """With more images than this in one request (counted over the whole request, as the upstream counts)..."""
    image_many_side: int | None = None
    """... each may have at most this many pixels on its long side (Anthropic: 20 images, then 2000 px)."""

    @field_validator("image_formats", mode="before")
    @classmethod
    def _formats(cls, value: Any) -> Any:
        if value is None or (isinstance(value, list | tuple) and not value):
            return None  # [] in a profiles file: no format check
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"must be a list of image formats; known: {list(IMAGE_FORMATS)}")
        bare = (v.strip().lower().removeprefix("image/") for v in value)
        names = tuple(dict.fromkeys(_ALIASES.get(n, n) for n in bare))
        unknown = [v for v in names if v not in IMAGE_FORMATS]
        if unknown:
            raise ValueError(f"unknown image format(s) {unknown}; known: {list(IMAGE_FORMATS)}")
        return names

    @field_validator("image_max_base64", "image_max_bytes", "image_max_side", "image_many_count", "image_many_side",
                     mode="before")
    @classmethod
    def _limit(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int)):
            raise ValueError("must be a whole number (0: no limit)")
        if value is not None and value < 0:
            raise ValueError("must be 0 (no limit) or more")
        return value or None


TEXT_ONLY = frozenset({"text"})
Learned = tuple[tuple[str, bool], ...]
"""Flags learned for one upstream from its rejections, sorted by name (see ``ProfileTable.resolve``)."""
FLAGS = tuple(n for n, f in Profile.model_fields.items() if f.annotation is bool)
"""The yes/no flags: what a profiles file may set, and all that llmfix can learn from a rejection (retry/)."""
SETTINGS = tuple(n for n in Profile.model_fields if n not in ("name", "catalogue"))
"""Everything a profiles file may set: the flags and the image limits (whole numbers, a list of formats)."""
