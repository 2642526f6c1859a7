"""Writes the tiny real-task inputs under specs/mmlongembed/tasks/ (committed; the embed-smoke
run and the real-task tests read them). Run from the repository root.

Multi-Source Reasoning (``reasoning.jsonl``): five made-up documents, each with two to four evidence
sentences and one with a picture. Logical Summarization: five text documents (``summaries.jsonl``) and
four page-image documents with unseen spare pages (``pages.jsonl``). Temporal Summarization
(``videos.jsonl``): four videos of 12 frames at 2 fps, three events each, every frame a distinct colour.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parents[1] / "specs" / "mmlongembed" / "tasks"
TOPICS = [
    ("Marlow", "glassblower", "Quenby", "amber lanterns", "1821"),
    ("Tessaly", "clockmaker", "Orrin", "brass astrolabes", "1794"),
    ("Vennick", "cartographer", "Ilse", "river charts", "1856"),
    ("Dunmere", "beekeeper", "Corwin", "heather honey", "1902"),
    ("Pellacott", "shipwright", "Arvid", "oak schooners", "1768"),
]
FILLER = [
    "The weather in the valley was mild for most of the year.",
    "Travellers often stopped at the inn by the old stone bridge.",
    "Market days brought farmers from the surrounding hills.",
    "The river froze only in the coldest winters.",
    "Children learned their letters in a one-room schoolhouse.",
    "A narrow road wound up towards the northern pass.",
]


def png(path: Path, size: tuple[int, int], colour: tuple[int, int, int], mark: int = 0) -> None:
    image = Image.new("RGB", size, colour)
    if mark:
        ImageDraw.Draw(image).rectangle((2, 2, 2 + mark, 6), fill=(255, 255, 255))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)


def reasoning() -> list[dict]:
    rows = []
    for i, (town, trade, person, goods, year) in enumerate(TOPICS):
        evidence = [
            f"{person} was the most famous {trade} of {town}.",
            f"The workshop of {person} produced {goods} for the royal court.",
            f"{town} was founded in {year} beside a salt marsh.",
            f"Every spring {town} held a fair devoted to {goods}.",
        ][: 2 + i % 3]
        segments = [{"text": FILLER[(i + k) % len(FILLER)]} for k in range(2)]
        for k, sentence in enumerate(evidence):
            segments.append({"text": sentence, "evidence": True})
            segments.append({"text": FILLER[(i + k + 2) % len(FILLER)]})
        if i == 0:
            png(HERE / "reasoning" / "map.png", (64, 32), (120, 160, 90))
            segments.insert(1, {"image": "reasoning/map.png"})
        rows.append(
            {
                "id": f"r{i}",
                "query": f"In which year was the town of the {trade} {person} founded?",
                "segments": segments,
            }
        )
    return rows


def summaries() -> list[dict]:
    rows = []
    for i, (town, trade, person, goods, year) in enumerate(TOPICS):
        sentences = [
            f"This report reviews the {trade} trade in {town} since {year}.",
            f"It finds that {person} trained most of the apprentices.",
            f"Exports of {goods} doubled over the decade.",
            f"Guild rules in {town} limited the number of workshops.",
            "The report recommends lifting the limit on workshops.",
            f"It also proposes a school for young {trade}s.",
            f"Funding would come from a small levy on {goods}.",
            f"The council of {town} will vote on the proposals next year.",
        ]
        rows.append(
            {
                "id": f"s{i}",
                "summary": f"A review of the {trade} trade in {town}: {goods}, apprentices, guild limits"
                " and a levy.",
                "segments": [{"text": s} for s in sentences],
            }
        )
    return rows


def pages() -> list[dict]:
    rows = []
    for i in range(4):
        shade = 60 + 40 * i
        for p in range(6):
            folder = "pages" if p < 4 else "spare"
            png(
                HERE / "pages" / f"doc{i}" / folder / f"{p:02d}.png",
                (64, 64),
                (shade, 200 - shade, 128),
                p + 1,
            )
        rows.append(
            {
                "id": f"p{i}",
                "summary": f"Document {i}: four pages in shade {shade}.",
                "pages": f"pages/doc{i}/pages",
                "spare_pages": f"pages/doc{i}/spare",
            }
        )
    return rows


def videos() -> list[dict]:
    rows = []
    for i in range(4):
        for f in range(12):
            png(HERE / "videos" / f"v{i}" / f"{f:03d}.png", (32, 32), (20 * f, 40 * i + 30, 255 - 20 * f))
        rows.append(
            {
                "id": f"v{i}",
                "query": f"First a red light fades in video {i}, then it turns purple, finally it goes blue.",
                "frames": f"videos/v{i}",
                "fps": 2,
                "events": [[0, 2], [2, 4.5], [4.5, 6]],
            }
        )
    return rows


def main() -> None:
    for name, rows in (
        ("reasoning", reasoning()),
        ("summaries", summaries()),
        ("pages", pages()),
        ("videos", videos()),
    ):
        lines = [json.dumps(r) for r in rows]
        (HERE / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
