"""The ruler's prompts: six built in, one per kind of text, or the user's own file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.errors import DraftlightError

ARTICLE = """\
The town of Vellmar sits where two rivers meet, and for most of its history the rivers \
decided what the town could be. In the nineteenth century the water turned the wheels of \
eleven mills; by 1950 only one still ground grain, and it closed in 1961 when the last \
miller retired without an heir who wanted the work.

For thirty years the mill stood empty. The roof failed in a storm in 1987, and pigeons \
moved in. Several plans came and went: a hotel, a car park, a museum of agricultural \
machinery that never found its machines. Each plan stalled on the same problem. The \
building flooded roughly once a decade, and no insurer would cover a business on the \
ground floor.

The change came from an unexpected direction. In 2009 a group of residents formed a \
cooperative to buy the mill for a symbolic sum from the council, on one condition: they \
would have to restore the water wheel and keep the building open to the public at least \
two days a week. The cooperative had no money, but it had members: retired engineers, a \
carpenter, two schoolteachers and a hydrologist who had moved to the town for its quiet.

The hydrologist, Marta Iversen, proposed turning the flooding problem inside out. Instead \
of keeping the river out, the restored ground floor would be designed to let it in. Floors \
were laid in stone, electrical fittings were moved above the record flood line, and the \
furniture was built to be carried upstairs in an hour. The upper floors became a workshop, \
a small library and a café.

The wheel was the hardest part. The original oak had rotted, and the cooperative spent \
four winters building a new one by hand, using drawings found in the county archive. When \
it turned again in 2015, it drove a generator rather than millstones. Today it supplies \
about a third of the building's electricity, and school groups visit to watch it run.

The mill has flooded twice since the restoration. Both times the café reopened within a \
week. Iversen says the lesson is not about mills at all: the town stopped fighting the \
river and started designing for it. Other towns along the valley have since asked the \
cooperative for its plans, and two have begun similar projects of their own.
"""

BUILT_IN: dict[str, str] = {
    "writing": "Write a travel blog post about a first visit to Kyoto in autumn: the temples, the food, "
    "the trains, and one small surprise. About 300 words.",
    "summarization": f"Summarize the following article in five sentences.\n\n{ARTICLE}",
    "arithmetic": "A bakery sells muffins at $3 each and cookies at $1.50 each. On Monday it sold 48 muffins "
    "and twice as many cookies. On Tuesday it sold 25% more muffins than on Monday and 12 fewer cookies "
    "than on Monday. How much money did the bakery take over the two days? Show each step.",
    "qa": "Answer these trivia questions, one line each: What is the capital of Australia? Which planet has "
    "the most moons? Who wrote 'Pride and Prejudice'? What is the chemical symbol for gold? In which year "
    "did the Berlin Wall fall?",
    "code": "Write a bubble sort in C++: a function that sorts a std::vector<int> in place, with an early "
    "exit when a pass makes no swaps, and a main() that sorts and prints an example vector.",
    "structured": "You can call this function:\n"
    '{"name": "book_flight", "parameters": {"origin": "IATA code", "destination": "IATA code", '
    '"date": "YYYY-MM-DD", "passengers": "integer", "cabin": "economy|business"}}\n'
    "Reply with only the JSON function call for: two people flying business class from Lisbon to "
    "Tokyo Haneda on the 3rd of March 2027.",
}

ISSUE_TWO_KINDS = ("code", "writing", "arithmetic", "structured")


@dataclass(frozen=True)
class BenchPrompt:
    name: str  # unique within a run, e.g. "code" or "writing-3"
    category: str
    text: str


def built_in(names: list[str] | None = None) -> list[BenchPrompt]:
    names = names or list(BUILT_IN)
    unknown = [n for n in names if n not in BUILT_IN]
    if unknown:
        raise DraftlightError(f"No built-in prompt named {', '.join(unknown)}; they are {', '.join(BUILT_IN)}.")
    return [BenchPrompt(n, n, BUILT_IN[n]) for n in names]


def load_file(path: str | Path) -> list[BenchPrompt]:
    """JSONL of {"category", "prompt"}, or Spec-Bench's question.jsonl (first turn used)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DraftlightError(f"Cannot read the prompts file {path}: {exc.strerror}.") from exc
    prompts: list[BenchPrompt] = []
    counts: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DraftlightError(f"{path.name} line {number} is not JSON ({exc.msg}).") from exc
        if "turns" in item:  # Spec-Bench
            turns = item.get("turns") or []
            text = turns[0] if turns else ""
            category = str(item.get("category", "spec-bench"))
        elif "prompt" in item:
            text, category = item["prompt"], str(item.get("category", "prompt"))
        else:
            raise DraftlightError(
                f"{path.name} line {number} has neither 'prompt' nor 'turns': "
                'expected {"category": ..., "prompt": ...} or Spec-Bench\'s {"question_id", "category", "turns"}.'
            )
        if not isinstance(text, str) or not text.strip():
            raise DraftlightError(f"{path.name} line {number} has an empty prompt.")
        counts[category] = counts.get(category, 0) + 1
        name = category if counts[category] == 1 else f"{category}-{counts[category]}"
        if "question_id" in item:
            name = f"{category}-{item['question_id']}"
        prompts.append(BenchPrompt(name, category, text))
    if not prompts:
        raise DraftlightError(f"{path.name} holds no prompts.")
    return prompts
