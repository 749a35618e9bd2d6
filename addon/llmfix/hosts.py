"""The hosts llmfix has a built-in profile for, each with the name of that profile (``llmfix.upstreams`` holds the
profiles). Plain strings with no imports, so that the launcher can name them without loading the profiles (pydantic
and the image package cost it about half a second before the client starts).
"""

from __future__ import annotations

BUILTIN_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    ("*.openai.azure.com", "openai"),
    ("api.x.ai", "xai"),
    ("api.anthropic.com", "anthropic"),
    ("api.deepseek.com", "deepseek"),
    ("openrouter.ai", "openrouter"),
    ("open.bigmodel.cn", "glm"),
    ("api.z.ai", "glm"),
    ("dashscope.aliyuncs.com", "qwen"),
    ("dashscope-*.aliyuncs.com", "qwen"),
    ("*.dashscope.aliyuncs.com", "qwen"),
    ("*.maas.aliyuncs.com", "qwen"),
    ("api.minimax.io", "minimax"),
    ("api.minimaxi.com", "minimax"),
    ("api.moonshot.ai", "moonshot"),
    ("api.moonshot.cn", "moonshot"),
    ("api.kimi.com", "moonshot"),
    ("api.kimi.ai", "moonshot"),
    ("generativelanguage.googleapis.com", "gemini"),
    ("aiplatform.googleapis.com", "vertex"),
    ("*-aiplatform.googleapis.com", "vertex"),
    ("*.rep.googleapis.com", "vertex"),
    ("cloudcode-pa.googleapis.com", "code-assist"),
    ("*-cloudcode-pa.googleapis.com", "code-assist"),
)
