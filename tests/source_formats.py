"""Small files in the published formats of the MMLongEmbed paper's sources, written by the tests: two
datasets per real task (HotpotQA, MMDocRAG; GovReport, MMLongBench-Doc; ActivityNet Captions,
YoukuDenseCaption), NeedleBench's and MM-NIAH's needles and OBELICS documents, each with the output
file of its model-assisted step where it has one. Pictures are tiny PNGs of distinct colours, so a
document fits the smallest length pool a test builds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image

SIDE = 64
"""A picture is ceil(64/32)^2 = 4 tokens by the paper's rule."""


def picture(path: Path, seed: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    colour = ((seed * 53) % 256, (seed * 97) % 256, (seed * 151) % 256)
    Image.new("RGB", (SIDE, SIDE), colour).save(path)
    return path.name


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


PLACES = ("Arden", "Brill", "Corvo", "Dunmore", "Elstow", "Fenwick")


def hotpotqa(folder: Path, n: int = 5) -> tuple[Path, Path]:
    questions = []
    for i in range(n):
        a, b = PLACES[i], PLACES[(i + 1) % len(PLACES)]
        questions.append(
            {
                "_id": f"hq{i}",
                "question": f"Which river flows through both {a} and {b}?",
                "answer": "the Wend",
                "type": "bridge",
                "level": "hard",
                "supporting_facts": [[a, 0], [b, 1]],
                "context": [
                    [a, [f"{a} is a market town on the river Wend.", "It has a stone bridge."]],
                    ["Orchards", ["Apple orchards line the valley.", "Cider is pressed in autumn."]],
                    [b, [f"{b} is a village.", f"The Wend reaches {b} from the north."]],
                ],
            }
        )
    path = write_json(folder / "hotpot_dev_distractor_v1.json", questions)
    audit = write_jsonl(folder / "audit.jsonl", [{"id": q["_id"], "keep": True} for q in questions])
    return path, audit


def mmdocrag(folder: Path, n: int = 5) -> tuple[Path, Path]:
    rows = []
    for i in range(n):
        image = f"images/doc{i}_fig.png"
        picture(folder / image, 10 + i)
        rows.append(
            {
                "q_id": i,
                "doc_name": f"REPORT_{i}",
                "domain": "Financial report",
                "question": f"How did revenue of segment {PLACES[i]} change in year {2010 + i}?",
                "evidence_modality_type": ["text", "chart"],
                "question_type": "numerical",
                "text_quotes": [
                    {
                        "quote_id": "text1",
                        "type": "text",
                        "text": f"Segment {PLACES[i]} grew.",
                        "page_id": 3,
                        "layout_id": 2,
                    },
                    {
                        "quote_id": "text2",
                        "type": "text",
                        "text": "Costs were flat.",
                        "page_id": 1,
                        "layout_id": 5,
                    },
                    {
                        "quote_id": "text3",
                        "type": "text",
                        "text": "The board met twice.",
                        "page_id": 5,
                        "layout_id": 1,
                    },
                ],
                "img_quotes": [
                    {
                        "quote_id": "image1",
                        "type": "chart",
                        "img_path": image,
                        "img_description": "A bar chart.",
                        "page_id": 4,
                        "layout_id": 3,
                    },
                ],
                "gold_quotes": ["text1", "image1"],
                "answer_short": "It grew.",
                "answer_interleaved": "It grew.",
            }
        )
    path = write_jsonl(folder / "evaluation_15.jsonl", rows)
    return path, write_jsonl(folder / "audit.jsonl", [{"id": str(r["q_id"]), "keep": True} for r in rows])


def govreport(folder: Path, n: int = 4) -> Path:
    for i in range(n):
        section = {
            "section_title": "Background",
            "paragraphs": [f"Program {PLACES[i]} funds rural clinics.", "Funding began in 2001."],
            "subsections": [
                {
                    "section_title": "Costs",
                    "paragraphs": ["Costs rose by a tenth.", "Staffing is short."],
                    "subsections": [],
                },
                {
                    "section_title": "Outlook",
                    "paragraphs": ["Demand is expected to grow.", "Reviews follow."],
                    "subsections": [],
                },
            ],
        }
        if i % 2 == 0:  # CRS
            report = {
                "id": f"R{i}",
                "title": f"Program {PLACES[i]}",
                "released_date": "2019-01-01",
                "reports": section,
                "summary": [f"Program {PLACES[i]} funds clinics; costs rose."],
            }
            write_json(folder / "crs" / f"R{i}.json", report)
        else:  # GAO
            report = {
                "id": f"GAO-{i}",
                "title": f"Program {PLACES[i]}",
                "fastfact": [],
                "report": [section],
                "highlight": [
                    {
                        "section_title": "What GAO Found",
                        "paragraphs": [f"Program {PLACES[i]} costs rose."],
                        "subsections": [],
                    }
                ],
            }
            write_json(folder / "crs" / f"GAO-{i}.json", report)
    return folder / "crs"


def mmlongbench_doc(folder: Path, n: int = 4, pages: int = 6) -> tuple[Path, Path]:
    samples, summaries = [], []
    for i in range(n):
        doc = f"brochure_{i}.pdf"
        for p in range(pages):
            picture(folder / f"brochure_{i}" / f"page_{p + 1:02d}.png", 100 + 10 * i + p)
        samples += [
            {
                "doc_id": doc,
                "doc_type": "Brochure",
                "question": f"q{i}-{k}",
                "answer": "a",
                "evidence_pages": "[1]",
                "evidence_sources": "['Pure-text (Plain-text)']",
                "answer_format": "Str",
            }
            for k in range(2)
        ]
        summaries.append({"id": doc, "summary": f"A brochure on the {PLACES[i]} gardens.", "pages": [1, 4]})
    return write_json(folder / "samples.json", samples), write_jsonl(folder / "summaries.jsonl", summaries)


def _videos(folder: Path, prefix: str, sentences: list[list[str]], seed: int) -> dict[str, Any]:
    videos = {}
    for i, said in enumerate(sentences):
        vid = f"{prefix}{i}"
        for f in range(6):
            picture(folder / vid / f"{f:05d}.png", seed + 10 * i + f)
        videos[vid] = {"duration": 6.0, "timestamps": [[0.0, 2.0], [2.0, 4.0], [4.0, 6.0]], "sentences": said}
    return videos


def activitynet(folder: Path, n: int = 4) -> Path:
    said = [
        [f"A man walks to the {p} court.", "He picks up a racket.", "He serves the ball."] for p in PLACES[:n]
    ]
    return write_json(folder / "val_1.json", _videos(folder, "v_", said, 300))


def youku(folder: Path, n: int = 4) -> tuple[Path, Path]:
    said = [[f"一个女人走进{k}号厨房。", "她切洋葱。", "她把汤端上桌。"] for k in range(n)]
    path = write_json(folder / "generation.json", _videos(folder, "yk", said, 500))
    translated = [
        {
            "id": f"yk{k}",
            "sentences": [f"A woman enters kitchen {k}.", "She chops onions.", "She serves soup."],
        }
        for k in range(n)
    ]
    return path, write_jsonl(folder / "translations.jsonl", translated)


def needlebench(folder: Path) -> tuple[Path, Path]:
    needles = [
        {
            "needle": "The first band to play on the Moon was the Virtual Rocket Band.",
            "retrieval_question": "Which band was the first to play on the Moon?",
            "gold_ans": "Virtual Rocket Band",
            "language": "English",
        },
        {
            "needle": "Hidden in the library is a map of the old mines.",
            "retrieval_question": "What is hidden?",
            "gold_ans": "a map",
            "language": "English",
        },
    ]
    lookalikes = {
        "id": "0",
        "entity": "the Moon",
        "lookalikes": [
            {
                "entity": e,
                "needle": f"The first band to play on {e} was the Virtual Rocket Band.",
                "question": f"Which band was the first to play on {e}?",
            }
            for e in ("Venus", "Mars", "Jupiter", "Saturn")
        ],
    }
    return write_jsonl(folder / "needles.jsonl", needles), write_jsonl(
        folder / "lookalikes.jsonl", [lookalikes]
    )


def mm_niah(folder: Path, choices: int = 4) -> tuple[Path, Path]:
    paths = [f"images/choice_{k}.png" for k in range(choices)]
    for k, p in enumerate(paths):
        picture(folder / p, 700 + k)
    sample = {
        "id": 0,
        "images_list": [],
        "context": "A long document.",
        "question": "Which of the following images appears in the document?",
        "answer": 2,
        "meta": {
            "placed_depth": [0.5],
            "context_length": 100,
            "context_length_text": 90,
            "context_length_image": 10,
            "num_images": 0,
            "needles": [paths[2]],
            "choices": None,
            "choices_image_path": paths,
        },
    }
    queries = {
        "id": "0",
        "queries": [f"Find the picture of the square in shade {k}." for k in range(choices)],
    }
    return write_jsonl(folder / "retrieval-image-val.jsonl", [sample]), write_jsonl(
        folder / "queries.jsonl", [queries]
    )


def obelics(folder: Path) -> tuple[Path, Path]:
    picture(folder / "downloaded" / "0001.png", 900)
    picture(folder / "local.png", 901)
    docs = [
        {
            "images": [None, "https://example.org/a.png", None, "https://example.org/dead.png", None],
            "texts": [
                "Harbour towns trade in salt and wool.",
                None,
                "Gulls circle the quay at dawn.",
                None,
                "The ferry leaves at noon; the tide is high.",
            ],
            "metadata": "[]",
            "general_metadata": "{}",
        },
        {
            "images": ["local.png", None],
            "texts": [None, "Moss grows on the north side of old walls."],
            "metadata": "[]",
            "general_metadata": "{}",
        },
    ]
    image_map = write_jsonl(
        folder / "image_map.jsonl", [{"url": "https://example.org/a.png", "path": "downloaded/0001.png"}]
    )
    return write_jsonl(folder / "obelics.jsonl", docs), image_map


def paper_shaped(root: Path, bins: list[int]) -> dict[str, Any]:
    """Every source written under ``root``; the run spec's ``real_tasks`` and ``visual_grounding`` over them
    (absolute paths), two datasets per task as in the paper."""
    hp, hp_audit = hotpotqa(root / "hotpotqa")
    md, md_audit = mmdocrag(root / "mmdocrag")
    mb, mb_summaries = mmlongbench_doc(root / "mmlongbench-doc")
    yk, yk_translations = youku(root / "youku")
    tasks = [
        ("multi-source-reasoning", "hotpotqa", hp, hp_audit, 5),
        ("multi-source-reasoning", "mmdocrag", md, md_audit, 5),
        ("logical-summarization", "govreport", govreport(root / "govreport"), None, 4),
        ("logical-summarization", "mmlongbench-doc", mb, mb_summaries, 4),
        ("temporal-summarization", "activitynet-captions", activitynet(root / "activitynet"), None, 4),
        ("temporal-summarization", "youku-dense-caption", yk, yk_translations, 4),
    ]
    text, lookalikes = needlebench(root / "needlebench")
    image, queries = mm_niah(root / "mm-niah")
    hay, image_map = obelics(root / "obelics")
    return {
        "real_tasks": [
            {"task": t, "dataset": d, "source": d, "path": str(p), "bins": bins, "candidates": c}
            | ({"model_output": str(m)} if m is not None else {})
            for t, d, p, m, c in tasks
        ],
        "visual_grounding": {
            "haystack": {"kind": "obelics", "path": str(hay), "image_map": str(image_map)},
            "needles": {
                "text": str(text),
                "text_lookalikes": str(lookalikes),
                "image": str(image),
                "image_queries": str(queries),
            },
        },
    }
