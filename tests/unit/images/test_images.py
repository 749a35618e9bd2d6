"""The image module alone: what it measures, what it refuses, how it fits, what it remembers."""

from __future__ import annotations

import asyncio
import base64
import io

import pytest
from PIL import Image

from llmfix import images
from llmfix.images import Fits, Fitted, Limits, Refused, Unusable, WouldBlock, decode, svg
from tests.images import b64, declared_png, image_bytes, noise_png, padded_png

ANTHROPIC = Limits(formats=frozenset({"jpeg", "png", "gif", "webp"}), max_base64=5_242_880, max_side=8000,
                   exact_type=True, undecodable_refused=True)
OPENAI = Limits(formats=frozenset({"jpeg", "png", "gif", "webp"}), gif_animated=False, max_base64=20_971_496,
                undecodable_refused=True)
XAI = Limits(formats=frozenset({"jpeg", "png"}), max_bytes=10 * 1024 * 1024, undecodable_refused=True)
ANY = Limits(formats=frozenset({"jpeg", "png", "gif", "webp"}))  # an upstream llmfix does not know


@pytest.fixture(autouse=True)
def fresh_cache():
    images.CACHE.clear()
    yield
    images.CACHE.clear()


def opened(got: Fitted) -> Image.Image:
    assert got.data is not None
    im = Image.open(io.BytesIO(base64.b64decode(got.data)))
    im.load()
    return im


@pytest.mark.parametrize("fmt", ["png", "jpeg", "gif", "webp", "bmp", "tiff"])
def test_measure_reads_format_pixels_and_sizes_from_the_bytes(fmt: str) -> None:
    data = image_bytes(fmt, 3, (7, 5))
    shape = images.measure(b64(data))
    assert shape is not None
    assert (shape.format, shape.width, shape.height, shape.frames) == (fmt, 7, 5, 1)
    assert shape.nbytes == len(data) and shape.b64 == len(b64(data))


def test_measure_counts_frames() -> None:
    shape = images.measure(b64(image_bytes("gif", 1, (4, 4), frames=3)))
    assert shape is not None and shape.frames == 3


def test_within_the_limits_it_fits_as_it_is() -> None:
    assert isinstance(images.fit(b64(image_bytes("png", 1, (8000, 3))), "image/png", ANTHROPIC), Fits)


def test_a_png_just_under_five_mb_of_base64_fits_one_just_over_does_not() -> None:
    under = padded_png(5_242_880 // 4 * 3)  # exactly 5242880 characters of base64
    assert len(b64(under)) == 5_242_880
    assert isinstance(images.fit(b64(under), "image/png", ANTHROPIC), Fits)
    over = padded_png(5_242_880 // 4 * 3 + 1)
    got = images.fit(b64(over), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted) and got.after.b64 <= 5_242_880 and "5242884 characters of base64" in got.why[0]


def test_over_the_base64_limit_it_is_re_encoded_keeping_its_pixels() -> None:
    raw = noise_png(1200, 1200)
    assert len(b64(raw)) > 5_242_880 > len(raw)  # under 5 MB as a file, over it as base64
    got = images.fit(b64(raw), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted)
    assert got.after.b64 <= 5_242_880 and len(got.data or "") == got.after.b64
    im = opened(got)
    assert im.size == (1200, 1200) and im.format == got.after.format.upper() == "JPEG"
    assert got.mime == "image/jpeg"


def test_too_wide_is_downscaled_to_the_limit_keeping_its_aspect_ratio() -> None:
    got = images.fit(b64(image_bytes("png", 2, (8500, 301))), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted)
    im = opened(got)
    assert im.size == (8000, round(301 * 8000 / 8500)) and im.format == "PNG"
    assert abs(im.size[1] - 301 * im.size[0] / 8500) < 1  # the aspect ratio within a pixel
    assert got.why == ("8500 px > 8000 px",)


def test_tall_images_are_scaled_by_their_long_side() -> None:
    got = images.fit(b64(image_bytes("jpeg", 2, (30, 2100))), "image/jpeg", ANTHROPIC.at_most(2000))
    assert isinstance(got, Fitted) and opened(got).size == (29, 2000) and got.mime == "image/jpeg"


def test_for_an_upstream_not_known_to_refuse_them_what_llmfix_cannot_read_goes_as_it_is(monkeypatch) -> None:
    heic = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(64)  # a format llmfix does not read
    got = images.fit(b64(heic), "image/heic", ANY)
    assert isinstance(got, images.Unreadable) and "cannot be decoded" in got.reason
    truncated = image_bytes("png", 4, (300, 200))[:-40]
    loads: list[object] = []
    monkeypatch.setattr(decode, "load", lambda *a, **k: loads.append(a))
    assert isinstance(images.fit(b64(truncated), "image/png", ANY), Fits) and not loads  # its header: all it reads
    svg_fit = images.fit(b64(b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="4"/>'), None, ANY)
    assert isinstance(svg_fit, Fitted) and svg_fit.mime == "image/png"  # what no upstream takes is converted


def test_the_stricter_of_two_limits() -> None:
    both = ANY.stricter(ANTHROPIC).stricter(OPENAI)
    assert both == Limits(frozenset({"jpeg", "png", "gif", "webp"}), 5_242_880, None, 8000, False, True, True)
    assert Limits().stricter(XAI) == XAI and XAI.stricter(Limits()) == XAI


def test_undecodable_bytes_are_unusable_with_the_reason() -> None:
    got = images.fit(b64(b"this is not an image"), "image/png", ANTHROPIC)
    assert isinstance(got, Unusable) and "cannot be decoded" in got.reason


def test_a_truncated_png_is_found_by_decoding_its_pixels() -> None:
    raw = noise_png(40, 40)
    got = images.fit(b64(raw[: len(raw) // 2]), "image/png", ANTHROPIC)
    assert isinstance(got, Unusable) and "data cannot be decoded" in got.reason and got.before is not None


def test_a_mislabelled_image_is_only_given_its_true_type() -> None:
    raw = image_bytes("jpeg", 4, (6, 6))
    got = images.fit(b64(raw), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted) and got.data is None and got.mime == "image/jpeg"
    assert isinstance(images.fit(b64(raw), "image/png", OPENAI), Fits)  # OpenAI does not compare them


@pytest.mark.parametrize("fmt", ["webp", "gif", "bmp", "tiff"])
def test_formats_xai_refuses_become_png(fmt: str) -> None:
    got = images.fit(b64(image_bytes(fmt, 5, (9, 4))), f"image/{fmt}", XAI)
    assert isinstance(got, Fitted) and got.mime == "image/png" and opened(got).size == (9, 4)


def test_an_animated_gif_goes_to_openai_as_its_first_frame() -> None:
    raw = image_bytes("gif", 6, (5, 5), frames=4)
    got = images.fit(b64(raw), "image/gif", OPENAI)
    assert isinstance(got, Fitted) and got.mime == "image/png" and "first frame of 4" in got.how
    first = Image.open(io.BytesIO(raw)).convert("RGB")
    assert opened(got).convert("RGB").tobytes() == first.tobytes()
    assert isinstance(images.fit(b64(image_bytes("gif", 6, (5, 5))), "image/gif", OPENAI), Fits)


def test_transparency_is_flattened_on_white_only_when_jpeg_is_needed() -> None:
    got = images.fit(b64(image_bytes("png", 7, (9000, 4), mode="RGBA")), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted) and opened(got).mode == "RGBA"  # a PNG keeps its alpha
    rgba = Image.frombytes("RGBA", (1100, 1100), bytes(range(256)) * (1100 * 1100 * 4 // 256) + b"\0" * 64)
    buf = io.BytesIO()
    rgba.save(buf, "PNG", compress_level=0)
    got = images.fit(b64(buf.getvalue()), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted) and got.mime == "image/jpeg" and "transparency flattened on white" in got.how


def test_the_output_carries_no_metadata() -> None:
    src = Image.new("RGB", (9000, 10), (1, 2, 3))
    buf = io.BytesIO()
    src.save(buf, "PNG", icc_profile=b"\0" * 200, pnginfo=_text_chunk("Software", "secret-tool 1.0"), dpi=(300, 300))
    got = images.fit(b64(buf.getvalue()), "image/png", ANTHROPIC)
    assert isinstance(got, Fitted)
    out = base64.b64decode(got.data or "")
    assert b"secret-tool" not in out and b"iCCP" not in out and b"pHYs" not in out and b"tIME" not in out


def _text_chunk(key: str, value: str):
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text(key, value)
    return info


def test_the_same_image_gives_the_same_bytes_and_is_converted_once() -> None:
    text = b64(noise_png(1200, 1200, seed=3))
    first = images.fit(text, "image/png", ANTHROPIC)
    converted = images.CACHE.converted
    again = images.fit(text, "image/png", ANTHROPIC)
    assert again is first and images.CACHE.converted == converted  # remembered: not converted again
    images.CACHE.clear()
    fresh = images.fit(text, "image/png", ANTHROPIC)
    assert isinstance(fresh, Fitted) and isinstance(first, Fitted) and fresh.data == first.data  # deterministic


def test_other_limits_are_another_answer() -> None:
    text = b64(image_bytes("png", 8, (2500, 10)))
    assert isinstance(images.fit(text, "image/png", ANTHROPIC), Fits)
    assert isinstance(images.fit(text, "image/png", ANTHROPIC.at_most(2000)), Fitted)


@pytest.mark.parametrize(("width", "height"), [(20_000, 20_000), (9000, 9000), (2, 80_000_001)])
def test_a_decompression_bomb_is_refused_before_decoding(width: int, height: int) -> None:
    with pytest.raises(Refused, match="decoding bound"):
        images.fit(b64(declared_png(width, height)), "image/png", ANTHROPIC)
    with pytest.raises(Refused):  # remembered too
        images.fit(b64(declared_png(width, height)), "image/png", ANTHROPIC)


def test_on_the_event_loop_a_new_image_would_block_a_remembered_one_does_not() -> None:
    text = b64(image_bytes("png", 9, (9000, 2)))

    async def on_loop() -> object:
        return images.fit(text, "image/png", ANTHROPIC)

    with pytest.raises(WouldBlock):
        asyncio.run(on_loop())
    images.fit(text, "image/png", ANTHROPIC)  # off the loop: computed
    assert isinstance(asyncio.run(on_loop()), Fitted)


def test_a_data_url_that_is_not_base64_is_read_too() -> None:
    text = "%3Csvg%20xmlns%3D%22http%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%20width%3D%2212%22%20height%3D%226%22%2F%3E"
    got = images.fit(text, "image/svg+xml", OPENAI, is_base64=False)
    assert isinstance(got, Fitted) and opened(got).size == (12, 6)


# ------------------------------------------------------------------------------------------------------- SVG

SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'


def svg_fit(text: str, limits: Limits = OPENAI) -> Fitted:
    got = images.fit(b64(text.encode()), "image/svg+xml", limits)
    assert isinstance(got, Fitted), got
    return got


@pytest.mark.parametrize(("attrs", "size"), [
    ('width="120" height="60"', (120, 60)),
    ('viewBox="0 0 300 150"', (300, 150)),
    ('width="100%" viewBox="0 0 30 10"', (30, 10)),
    ('width="60" viewBox="0 0 30 10"', (60, 20)),
    ('width="1in" height="0.5in"', (96, 48)),
    ("", (100, 100)),
])
def test_an_svg_is_rasterized_at_its_own_size(attrs: str, size: tuple[int, int]) -> None:
    got = svg_fit(f'<svg {SVG_NS} {attrs}><rect width="100%" height="100%" fill="#123456"/></svg>')
    im = opened(got)
    assert im.size == size and got.mime == "image/png" and got.how[0] == "rasterized"
    assert im.convert("RGB").getpixel((size[0] // 2, size[1] // 2)) == (0x12, 0x34, 0x56)


def test_a_huge_svg_canvas_is_capped() -> None:
    got = svg_fit(f'<svg {SVG_NS} width="100000" height="50000"><rect width="100%" height="100%"/></svg>')
    assert opened(got).size == (svg.RASTER_SIDE, svg.RASTER_SIDE // 2)
    small = svg_fit(f'<svg {SVG_NS} width="100000" height="50000"><rect width="100%" height="100%"/></svg>',
                    ANTHROPIC.at_most(2000))
    assert opened(small).size == (2000, 1000)


def test_an_svg_never_reads_local_files_or_urls(tmp_path) -> None:
    red = tmp_path / "red.png"
    Image.new("RGB", (10, 10), (255, 0, 0)).save(red)
    for href in (str(red), "red.png", f"file://{red}", "http://127.0.0.1:9/x.png"):
        got = svg_fit(f'<svg {SVG_NS} xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10">'
                      f'<image href="{href}" width="10" height="10"/>'
                      f'<image xlink:href="{href}" width="10" height="10"/></svg>')
        assert opened(got).convert("RGBA").getpixel((5, 5)) == (0, 0, 0, 0), href  # nothing drawn


def test_an_inline_raster_in_an_svg_is_drawn() -> None:
    inner = b64(image_bytes("png", 1, (10, 10)))
    got = svg_fit(f'<svg {SVG_NS} width="10" height="10"><image href="data:image/png;base64,{inner}" '
                  'width="10" height="10"/></svg>')
    assert opened(got).convert("RGB").getpixel((5, 5)) == Image.open(io.BytesIO(image_bytes("png", 1, (10, 10)))
                                                                      ).convert("RGB").getpixel((5, 5))


def test_an_svg_bomb_is_refused() -> None:
    inner = b64(declared_png(30_000, 30_000))
    with pytest.raises(Refused):
        svg_fit(f'<svg {SVG_NS} width="10" height="10"><image href="data:image/png;base64,{inner}"/></svg>')
    chain = "".join(f'<g id="g{n}">' + f'<use href="#g{n - 1}"/>' * 10 + "</g>" for n in range(1, 8))
    with pytest.raises(Refused, match="expand"):
        svg_fit(f'<svg {SVG_NS} width="10" height="10"><defs><rect id="g0" width="1" height="1"/>{chain}</defs>'
                '<use href="#g7"/></svg>')


@pytest.mark.parametrize("text", [
    "<svg",
    f'<svg {SVG_NS} width="abc" height="1"/>',
    '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg>&x;</svg>',
    f'<html><svg {SVG_NS}/></html>',
])
def test_a_broken_svg_is_unusable(text: str) -> None:
    got = images.fit(b64(text.encode()), "image/svg+xml", OPENAI)
    assert isinstance(got, Unusable) and "cannot be decoded" in got.reason


def test_shapes_name_themselves_without_payloads() -> None:
    shape = images.measure(b64(image_bytes("png", 1, (3, 2))))
    assert str(shape).startswith("PNG 3×2, ") and "as base64" in str(shape)


def test_the_decoding_bound_is_on_the_pixels_decoded_not_on_a_side() -> None:
    strip = image_bytes("png", 2, (41_000, 8), mode="L")  # 0.3 megapixels: taken as it is where sides are free
    assert isinstance(images.fit(b64(strip), "image/png", OPENAI), Fits)
    assert decode.open_image(declared_png(100_000, 1000), 0).shape.width == 100_000  # the header alone: read
    with pytest.raises(Refused, match="100000×1000 px"):
        decode.load(decode.open_image(declared_png(100_000, 1000), 0))  # 100 megapixels: never decoded


def test_a_large_jpeg_is_bounded_at_the_scale_it_is_decoded_at() -> None:
    """A 12000×7000 JPEG is 84 megapixels; for a 2000 px limit it is decoded at an eighth of its scale."""
    photo = image_bytes("jpeg", 5, (12_000, 7000))
    got = images.fit(b64(photo), "image/jpeg", ANTHROPIC.at_most(2000))
    assert isinstance(got, Fitted) and opened(got).size == (2000, 1167)
    with pytest.raises(Refused):
        images.fit(b64(photo), "image/jpeg", ANTHROPIC)  # for 8000 px it would be decoded whole


def test_anthropic_takes_image_jpeg_never_image_jpg() -> None:
    raw = image_bytes("jpeg", 4, (6, 6))
    got = images.fit(b64(raw), "image/jpg", ANTHROPIC)
    assert isinstance(got, Fitted) and got.data is None and got.mime == "image/jpeg"
    assert isinstance(images.fit(b64(raw), "image/jpeg", ANTHROPIC), Fits)


# --------------------------------------------------------------------------- as a viewer shows it: EXIF, ICC


def test_a_photo_is_fitted_as_it_is_shown_upright() -> None:
    """A phone's portrait photo: its pixels stored landscape, EXIF Orientation 6 (show turned 90° clockwise)."""
    from PIL import ImageOps

    stored = Image.new("RGB", (90, 30), (20, 40, 220))
    stored.paste((230, 20, 20), (0, 0, 30, 30))  # the stored left third: the top of the photo as shown
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    stored.save(buf, "JPEG", exif=exif.tobytes(), quality=95)
    got = images.fit(b64(buf.getvalue()), "image/jpeg", ANTHROPIC.at_most(60))
    assert isinstance(got, Fitted) and "EXIF orientation 6" in ", ".join(got.how)
    out = opened(got)
    assert out.size == (20, 60) and out.getexif().get(0x0112) is None
    shown = ImageOps.exif_transpose(Image.open(io.BytesIO(buf.getvalue()))).resize(out.size)
    for xy in ((10, 5), (10, 55)):
        assert max(abs(a - b) for a, b in zip(out.getpixel(xy), shown.getpixel(xy), strict=True)) < 24, xy
    assert (got.after.width, got.after.height) == (20, 60)


def p3_png(color: tuple[int, ...], size: tuple[int, int] = (120, 80)) -> bytes:
    from tests.images import rgb_profile

    buf = io.BytesIO()
    Image.new("RGBA" if len(color) == 4 else "RGB", size, color).save(buf, "PNG", icc_profile=rgb_profile())
    return buf.getvalue()


@pytest.mark.parametrize(("color", "shown"), [((200, 60, 40), (219, 37, 13)), ((200, 60, 40, 128), (219, 37, 13, 128))])
def test_a_wide_gamut_screenshot_keeps_its_colours(color: tuple[int, ...], shown: tuple[int, ...]) -> None:
    """A Display-P3 screenshot: re-encoded without its profile, its pixels must be the sRGB colours a viewer shows
    (P3 (200, 60, 40) is sRGB (219, 37, 13)), or every colour shifts."""
    got = images.fit(b64(p3_png(color)), "image/png", ANTHROPIC.at_most(60))
    assert isinstance(got, Fitted) and "converted to sRGB from its ICC profile" in got.how
    out = opened(got)
    assert "icc_profile" not in out.info and out.getpixel((30, 20)) == shown
    images.CACHE.clear()
    again = images.fit(b64(p3_png(color)), "image/png", ANTHROPIC.at_most(60))
    assert isinstance(again, Fitted) and again.data == got.data  # deterministic


def test_without_littlecms_the_profile_is_kept_in_the_output(monkeypatch) -> None:
    from llmfix.images import appearance
    from tests.images import rgb_profile

    monkeypatch.setattr(appearance, "ImageCms", None)
    got = images.fit(b64(p3_png((200, 60, 40))), "image/png", ANTHROPIC.at_most(60))
    assert isinstance(got, Fitted)
    out = opened(got)
    assert out.info.get("icc_profile") == rgb_profile() and out.getpixel((30, 20)) == (200, 60, 40)
