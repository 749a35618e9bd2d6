"""`redact_text` on long strings: nothing secret or base64 gets through, media keep their true size and hash.

Long strings take a fast path (only the head that survives the cut is redacted); these tests put data
URLs, keys and base64 runs everywhere around that cut.
"""

from __future__ import annotations

import base64
import os
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from llmfix.body.media import ref_for_url
from llmfix.report.redact import MAX_TEXT, redact_text

_B64 = re.compile(r"[A-Za-z0-9+/]{64,}")


def _png(n: int, seed: int) -> str:
    return "data:image/png;base64," + base64.b64encode(bytes((seed + i) % 256 for i in range(n))).decode()


def test_a_whole_data_url_becomes_its_reference_with_the_true_size() -> None:
    url = "data:image/png;base64," + base64.b64encode(os.urandom(3 * 1024 * 1024)).decode()
    assert redact_text(url) == str(ref_for_url(url)) == redact_text(url, 0)
    assert "3.0 MB" in redact_text(url)


def test_a_data_url_crossing_the_cut_is_summarised_whole() -> None:
    url = _png(60_000, 7)
    for before in (0, 100, MAX_TEXT - 30, MAX_TEXT + 8000, MAX_TEXT + 8192 - 5):
        text = "x " * (before // 2) + url + " and then some words"
        out = redact_text(text)
        assert not _B64.search(out), before
        ref, at = str(ref_for_url(url)), out.find("<image/png")
        if at >= 0:  # shown (maybe cut short): then with its real size and hash
            shown = out[at:].split("…(+")[0]
            assert ref.startswith(shown), (before, shown)


def test_a_key_crossing_the_cut_is_never_shown() -> None:
    key = "sk-proj-" + "Ab1" * 20
    for before in range(MAX_TEXT + 8192 - 70, MAX_TEXT + 8192 + 5, 7):
        text = "y" * before + " " + key + " tail " + "z" * 9000
        assert "Ab1Ab1Ab1" not in redact_text(text), before


_PIECES = st.one_of(
    st.text(alphabet="abc XYZ.,\n", min_size=1, max_size=3000),
    st.integers(0, 255).map(lambda s: _png(2000 + s * 37, s)),
    st.integers(0, 255).map(lambda s: base64.b64encode(bytes(range(s % 200, 256)) * 3).decode()),
    st.sampled_from(["sk-ant-api03-" + "k9" * 30, "xai-" + "Q" * 40, "Bearer abcdefghijklmnop.qrstuv",
                     "ghp_" + "a1" * 12]),
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=12), limit=st.sampled_from([0, 200, 300, MAX_TEXT]))
def test_no_secret_or_payload_survives_and_the_length_is_bounded(pieces: list[str], limit: int) -> None:
    text = " ".join(pieces)
    out = redact_text(text, limit)
    assert not _B64.search(out)
    for secret in ("k9k9k9k9", "QQQQQQQQ", "abcdefghijklmnop", "a1a1a1a1"):
        assert secret not in out
    if limit:
        assert len(out) <= limit + len(f"…(+{len(text)} chars)")


def test_a_long_data_url_with_a_key_shaped_mime_type_leaks_nothing() -> None:
    payload = "A" * 9000
    for head in ("data:image/sk-proj-abcdefgh12345678;base64,", "data:xai-abcdefgh12345678/png;base64,",
                 "data:image/" + "Q" * 300 + ";base64,"):
        out = redact_text(head + payload, 200)
        assert "abcdefgh1234" not in out and "Q" * 64 not in out, out
        assert len(out) <= 200 + len("…(+99999 chars)")


def test_google_keys_and_oauth_tokens_in_text_are_masked() -> None:
    """Gemini's API key and Code Assist's OAuth access token, printed by a tool into a conversation llmfix logs."""
    key = "AIza" + "Sy0aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0u"
    token = "ya29.a0AfB_" + "byC3dE4fG5hI6jK7lM8nO9pQ0rS1tU2vW3xY4z" * 3
    out = redact_text(f"GEMINI_API_KEY={key}\n$ gcloud auth print-access-token\n{token}\ndone")
    assert key[4:16] not in out and token[5:17] not in out and token[40:52] not in out
    assert out.count("<secret ") == 2 and out.endswith("\ndone")
