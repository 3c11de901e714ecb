"""The pairing panel's screenshot (docs/pairing.png): the default pair, its probe run on three prompts.

Run under a real display or Xvfb:
  xvfb-run -a -s "-screen 0 1440x900x24" .venv/bin/python docs/pairing_screenshot.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docs.screenshots import OUT, wait

PROMPTS = [
    "Write a bubble sort in C++.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Explain what a hash map is in two sentences.",
]


def main() -> int:
    from app.main import make_app
    from app.pairing import PairingPanel

    app = make_app()
    panel = PairingPanel("default", "default", PROMPTS)
    panel.probe_tokens = 32
    panel.probe_seconds = 900  # a loaded box is slow: every prompt runs to its 32 tokens
    panel.show()
    wait(lambda: panel.report is not None)
    panel.start_probe()
    wait(lambda: panel.report is not None and panel.report.probe is not None and not panel.probing, timeout=1200)
    app.processEvents()
    panel.grab().save(str(OUT / "pairing.png"))
    panel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
