"""The image limits of a profile: typed fields the profiles file sets and validates; the flags retry/ learns stay
yes/no."""

from __future__ import annotations

import pytest

from llmfix.dialects.registry import CHAT, MESSAGES
from llmfix.images import Limits
from llmfix.profiles import BUILTIN, FLAGS, SETTINGS, Profile, ProfileTable, parse_table
from llmfix.repairs import fit_images
from llmfix.retry import rejections


def test_flags_retry_can_learn_are_all_yes_or_no() -> None:
    assert all(Profile.model_fields[f].annotation is bool for f in FLAGS)
    assert "image_max_side" not in FLAGS and "image_formats" not in FLAGS
    assert {"image_max_side", "image_formats", "image_many_count"} <= set(SETTINGS)
    assert all(v is True or v is False for r in rejections.RULES for _, v in r.flags)


def test_the_profiles_file_sets_image_limits_as_validated_values() -> None:
    table = parse_table({"hosts": {"gw.example": {"base": "anthropic", "image_formats": ["PNG", "jpg", "image/webp"],
                                                  "image_max_side": 4096, "image_max_base64": 0,
                                                  "image_gif_animated": False}}})
    profile = table.resolve("gw.example", 443, None).profile
    assert profile.image_formats == ("png", "jpeg", "webp")
    assert profile.image_max_side == 4096 and profile.image_max_base64 is None  # 0: no limit (Anthropic's 5 MB off)
    assert profile.image_gif_animated is False and profile.image_many_side == 2000  # the rest from anthropic
    rules = fit_images.rules_of(profile)
    assert rules is not None and rules.limits.formats == frozenset({"png", "jpeg", "webp"})


@pytest.mark.parametrize(("entry", "match"), [
    ({"image_formats": ["heic"]}, "unknown image format"),
    ({"image_formats": "png"}, "list of image formats"),
    ({"image_max_side": -1}, "0 \\(no limit\\) or more"),
    ({"image_max_side": 1.5}, "whole number"),
    ({"image_max_bytes": True}, "whole number"),
    ({"image_many_count": "20"}, "whole number"),
    ({"image_max_pixels": 9}, "unknown flag"),
])
def test_bad_image_limits_are_refused_with_the_entry_named(entry: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        parse_table({"hosts": {"gw.example": entry}})
    assert 'hosts."gw.example"' in str(err.value)


def test_the_built_ins_carry_the_published_limits() -> None:
    a = BUILTIN["anthropic"]
    assert (a.image_max_base64, a.image_max_side, a.image_many_count, a.image_many_side) == (5_242_880, 8000, 20, 2000)
    assert set(a.image_formats or ()) == {"jpeg", "png", "gif", "webp"} and a.image_media_type_checked
    o = BUILTIN["openai"]
    assert o.image_gif_animated is False and o.image_max_base64 == 20_971_496 and o.image_max_side is None
    x = BUILTIN["xai"]
    assert x.image_formats == ("jpeg", "png") and x.image_max_bytes == 10 * 1024 * 1024
    assert fit_images.rules_of(BUILTIN["deepseek"]) is None  # its Chat API takes no image at all (omitted)
    for host, name in (("gateway.example", "spec"), ("openrouter.ai", "openrouter")):
        gateway = ProfileTable().resolve(host, 443, None, CHAT).profile
        assert gateway.name == name and set(gateway.image_formats or ()) == {"jpeg", "png", "gif", "webp"}
        rules = fit_images.rules_of(gateway)
        assert rules is not None and rules.limits == Limits(formats=frozenset({"jpeg", "png", "gif", "webp"}))
        assert (rules.many_count, rules.many_side) == (None, None)  # no vendor's limit on a guess


def test_a_learned_vendor_flag_puts_that_vendors_image_limits_on_an_unknown_host() -> None:
    anthropic = fit_images.rules_of(BUILTIN["anthropic"])
    openai = fit_images.rules_of(BUILTIN["openai"])
    assert anthropic is not None and openai is not None and "image_limits_anthropic" in FLAGS
    table = ProfileTable()
    learned = table.resolve("llm.gateway.example", 443, None, MESSAGES, (("image_limits_anthropic", True),))
    assert fit_images.rules_of(learned.profile) == anthropic
    both = table.resolve("llm.gateway.example", 443, None, CHAT,
                         (("image_limits_anthropic", True), ("image_limits_openai", True))).profile
    rules = fit_images.rules_of(both)
    assert rules is not None and rules.limits == anthropic.limits.stricter(openai.limits)
    assert not rules.limits.gif_animated and rules.many_side == 2000
    # the profiles file still wins over what was learned
    pinned = parse_table({"hosts": {"llm.gateway.example": {"image_limits_anthropic": False}}})
    assert fit_images.rules_of(pinned.resolve("llm.gateway.example", 443, None, MESSAGES,
                                              (("image_limits_anthropic", True),)).profile) == \
        fit_images.rules_of(BUILTIN["spec"])
