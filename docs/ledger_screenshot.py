"""The acceptance ledger's warning on screen (docs/ledger-warning.png): the window loads the default
drafter against a changed copy of the default target, and the ledger filled by
benchmarks/ledger_changed_target.py says acceptance fell since the target's file changed.
Then the pairing panel's history (docs/ledger-history.png).

    DRAFTLIGHT_LEDGER=/tmp/ledger.sqlite3 python benchmarks/ledger_changed_target.py /tmp/changed
    DRAFTLIGHT_LEDGER=/tmp/ledger.sqlite3 xvfb-run -a -s "-screen 0 1440x900x24" \\
        .venv/bin/python docs/ledger_screenshot.py /tmp/changed/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf [--baseline N]

`--baseline N` shortens the baseline to N drafts (engine.ledger.drift.BASELINE_DRAFTS, 3,000), and
the drafts since a change judged at once (CHANGE_DRAFTS, 300) to as many, for a ledger filled by a
few replies, as tests/engine/ledger/test_ledger_real.py's is.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docs.screenshots import OUT, wait


def main() -> int:
    from app import settings
    from app.main import make_app
    from app.pairing import PairingPanel
    from app.window import MainWindow

    changed = sys.argv[1]
    if "--baseline" in sys.argv:
        from engine.ledger import drift

        drift.BASELINE_DRAFTS = int(sys.argv[sys.argv.index("--baseline") + 1])
        drift.CHANGE_DRAFTS = min(drift.CHANGE_DRAFTS, drift.BASELINE_DRAFTS)
    app = make_app()
    tmp = Path(tempfile.mkdtemp(prefix="draftlight-ledger-shot-"))
    prefs = settings.Preferences(depth=3, max_tokens=200, target=changed, drafter="default")
    window = MainWindow(store_path=tmp / "c.sqlite3", prefs=prefs)
    window.resize(1400, 860)
    window.show()
    wait(lambda: window.pair is not None and not window.busy)
    app.processEvents()
    window.grab().save(str(OUT / "ledger-warning.png"))
    box = window.notice.show_details()
    app.processEvents()
    box.grab().save(str(OUT / "ledger-warning-why.png"))
    box.close()
    panel = PairingPanel(changed, "default")
    panel.show()
    wait(lambda: panel.report is not None)
    app.processEvents()
    panel.grab().save(str(OUT / "ledger-history.png"))
    panel.close()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
