"""The kit's tiler: the official layout (checked against the official script's output), determinism, cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import PIL
import pytest
from PIL import Image

from milebench.benchmarks.milebench.preprocess import combine

GOLDEN = Path(__file__).parents[2] / "golden" / "combine_official.json"
CASES = [(1, 0), (2, 0), (3, 4), (5, 0)]
"""(images, first label index): pictures the official script made from :func:`synthetic_images`."""


def synthetic_images(folder: Path) -> list[Path]:
    """Five small images of several modes and aspect ratios (RGB with a diagonal, L, RGBA, P)."""
    folder.mkdir(parents=True, exist_ok=True)
    specs = [
        ("RGB", (120, 90), (200, 30, 30)),
        ("L", (50, 200), 128),
        ("RGBA", (300, 300), (10, 200, 90, 255)),
        ("P", (64, 64), 3),
        ("RGB", (31, 17), (0, 0, 255)),
    ]
    paths = []
    for i, (mode, size, colour) in enumerate(specs):
        image = Image.new(mode, size, colour)
        if mode == "RGB":
            for x in range(size[0]):
                image.putpixel((x, x * size[1] // size[0]), (255, 255, 0))
        path = folder / f"{i}.png"
        image.save(path)
        paths.append(path)
    return paths


def test_groups_follow_the_official_split() -> None:
    assert combine.groups(5, 1) == [range(0, 5)]
    assert combine.groups(7, 3) == [range(0, 3), range(3, 6), range(6, 7)]
    assert combine.groups(2, 4) == [range(0, 1), range(1, 2)]  # fewer images than pictures: one each
    assert [len(g) for g in combine.groups(109, 4)] == [28, 28, 28, 25]


def test_grid_has_ceil_sqrt_columns() -> None:
    assert [combine.grid(n) for n in (1, 2, 3, 4, 5, 10, 17)] == [
        (1, 1),
        (2, 1),
        (2, 2),
        (2, 2),
        (3, 2),
        (4, 3),
        (5, 4),
    ]


def test_geometry_tiles_and_label_box(tmp_path: Path) -> None:
    paths = synthetic_images(tmp_path)
    canvas = combine.picture(paths[:3], 0)
    assert canvas.size == (1600, 1600) and canvas.mode == "RGB"
    assert canvas.getpixel((1200, 1200)) == (0, 0, 0)  # the empty fourth cell stays black
    assert canvas.getpixel((400, 100)) == (200, 30, 30)  # tile 1 top-left, resized over the whole cell
    assert canvas.getpixel((1200, 100)) == (128, 128, 128)  # tile 2 to its right
    assert canvas.getpixel((400, 900)) == (10, 200, 90)  # tile 3 starts the second row
    origin, (left, top, right, bottom) = combine.label_box("Image 1")
    assert (left + right) // 2 in (399, 400)  # centred
    assert bottom == combine.TILE[1] + combine.PADDING  # the box runs past the bottom edge
    assert origin[1] - top == combine.PADDING + combine.LIFT
    box = canvas.crop((left, top, right, combine.TILE[1]))
    colours = {c for _, c in box.getcolors(1 << 16)}
    assert (0, 0, 0) in colours and any(min(c) > 200 for c in colours)  # black box with white text
    assert canvas.getpixel((left - 1, top + 5)) == (200, 30, 30)  # just outside the box: the image


def test_matches_the_official_script(tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    if golden["pillow"] != PIL.__version__:
        pytest.skip(f"golden made with Pillow {golden['pillow']}; this is {PIL.__version__}")
    paths = synthetic_images(tmp_path)
    for n, start in CASES:
        expected = golden["cases"][f"{n}/{start}"]
        made = combine.picture(paths[:n], start)
        assert list(made.size) == expected["size"]
        assert hashlib.sha256(made.tobytes()).hexdigest() == expected["pixels_sha256"], (n, start)
        assert hashlib.sha256(combine.encode(made)).hexdigest() == expected["jpeg_sha256"], (n, start)


def test_identical_input_gives_identical_bytes_and_is_cached(tmp_path: Path) -> None:
    paths = synthetic_images(tmp_path / "in")
    digests = tuple(hashlib.sha256(p.read_bytes()).hexdigest() for p in paths)
    jobs = combine.sample_jobs(paths, digests, 2)
    assert [j.first_index for j in jobs] == [0, 3]
    first = combine.make_pictures(jobs, tmp_path / "a")
    second = combine.make_pictures(jobs, tmp_path / "b", workers=2)
    assert [p.name for p in first] == [p.name for p in second]
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    stamp = first[0].stat().st_mtime_ns
    assert combine.make_pictures(jobs, tmp_path / "a") == first
    assert first[0].stat().st_mtime_ns == stamp  # served from the cache, not redrawn
    changed = combine.sample_jobs(paths, (digests[0][::-1], *digests[1:]), 2)
    assert changed[0].key != jobs[0].key and changed[1].key == jobs[1].key
