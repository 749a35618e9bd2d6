"""Google Gemini's native API (``…:generateContent``, ``…:streamGenerateContent``, ``…:countTokens`` on the Gemini API,
Vertex and Code Assist): its typed models, views, learners and rejections.

Empty on purpose: :mod:`.dialect` assembles the dialect (importing it here would make the neutral views, which the
modules of this folder use, import themselves back)."""
