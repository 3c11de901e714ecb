"""Help → Draftlight guide: a short page on what the app shows and how to use it."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

GUIDE = """
<h2>Draftlight in five minutes</h2>
<p><b>What it does.</b> A large <i>target</i> model writes each reply; a small <i>drafter</i> guesses
the next few tokens, and the target checks a whole guess in one pass. Greedy replies are exactly
the target's own text, only faster where the guesses are right.</p>
<h3>Reading a reply</h3>
<p>Every token is coloured by where it came from: <b>accepted</b> (the drafter guessed it),
<b>replaced</b> (the target overruled a guess), <b>bonus</b> (the target's extra token after a
fully accepted guess) and <b>plain</b> (no guess). The legend above the message box names the
colours and their underline cues; hover a token for its round, position and probabilities.</p>
<h3>Depth and Auto</h3>
<p>The depth is how many tokens the drafter guesses a round. <b>Auto</b> chooses it each round from
this machine's measured costs and the conversation's acceptance. The first time, Draftlight
measures this machine in the background while replies stream plain; Tools → Measure This
Machine measures it again. Where no depth can pay, replies run plain on the fastest settings
and the line under the conversation says why.</p>
<h3>Conversations</h3>
<p>Return sends (or Ctrl+Return, in Preferences). Regenerate (Ctrl+R) writes another reply in
place of the last; Edit and resend (Ctrl+E) changes a message and continues from it. Delete
removes a message or a failed reply; Edit → Undo (Ctrl+Z) brings back a deleted message or
conversation, while the message box has the focus it undoes typing. A conversation longer than
the context leaves its oldest turns out of the prompt, said above the reply; the context is set in
Preferences.</p>
<h3>Tools</h3>
<p>Teaching mode steps through a reply's rounds; the prompt lab runs a prompt at several depths;
the speedup calculator works out (1 + a) / c for a what-if. Help → Keyboard shortcuts lists
every key.</p>
"""


class GuideWindow(QDialog):
    """The guide, a page of its own beside the main window."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Draftlight guide")
        self.setObjectName("guide")
        self.page = QTextBrowser()
        self.page.setHtml(GUIDE)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.page)
        layout.addWidget(buttons)
        self.resize(560, 520)
