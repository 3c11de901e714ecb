"""The status bar: the figures people read (decode speed, the verdict, acceptance, where replies
come from); end-to-end speed, prefill, round cost, the drafter and thermal state in its tooltip."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QStatusBar

from engine import DRAFTER_KINDS, RunStats, ThermalReading, gauge, measured_plain_pass_s, measured_round_cost

KEYS = ("decode", "gauge", "e2e", "prefill", "acceptance", "cost", "drafter", "thermal", "place")
REPLY_KEYS = KEYS[:6]  # what a reply's figures fill; the rest say what runs, how hot, and where
SHOWN = ("decode", "gauge", "acceptance", "place")  # on the bar; the rest in the "more" tooltip
REMOTE_DRAFTER = "the server's drafter"  # a remote engine's drafter, which this machine cannot name


def plain_pass_s(replies: list[RunStats], profile_pass_s: float | None) -> float | None:
    """Seconds per plain target pass: from replies with speculation off, else the box profile's."""
    return measured_plain_pass_s(replies) or profile_pass_s


def plain_basis(replies: list[RunStats], profile_basis: str) -> str:
    """What that plain speed rests on, in words: this conversation's plain replies, or the profile's basis."""
    measured = measured_plain_pass_s(replies)
    return (
        f"plain {1 / measured:.1f} tok/s, measured in this conversation's plain replies" if measured else profile_basis
    )


class StatusLine:
    """Permanent labels on a QStatusBar, one per figure."""

    def __init__(self, bar: QStatusBar) -> None:
        self.labels = {k: QLabel() for k in KEYS}
        for key, label in self.labels.items():
            label.setObjectName(f"status_{key}")
            if key in SHOWN:
                bar.addPermanentWidget(label)
        self.more = QLabel("more…")
        self.more.setObjectName("status_more")
        bar.addPermanentWidget(self.more)
        self._details()
        self.labels["cost"].setToolTip(
            "A round's time in plain target passes, against this conversation's replies with "
            "speculation off, or the box profile Auto measured."
        )

    def show(
        self,
        stats: RunStats | None,
        pass_s: float | None = None,
        session: list[RunStats] | None = None,
        basis: str = "",
    ) -> None:
        """A reply's figures; with the plain speed (pass_s, resting on `basis`) the break-even gauge, for it and
        the session."""
        s = self.labels
        if stats is None:
            for key in REPLY_KEYS:
                s[key].setText("")
                s[key].setToolTip("")
            self._details()
            return
        s["decode"].setText(f"decode {stats.decode_tps:.1f} tok/s")
        message, whole = gauge([stats], pass_s, basis), gauge(session or [stats], pass_s, basis)
        s["gauge"].setText(f"plain {message.plain_tps:.1f} tok/s · {message.short()}" if message else "")
        s["gauge"].setToolTip(
            f"This reply: {message.verdict()}.\nThis conversation: {whole.verdict()}." if message and whole else ""
        )
        s["e2e"].setText(f"end-to-end {stats.end_to_end_tps:.1f} tok/s")
        s["prefill"].setText(f"prefill {stats.prefill_s * 1e3:.0f} ms ({stats.prompt_tokens} tokens)")
        s["acceptance"].setText(f"acceptance {stats.acceptance:.0%}" if stats.drafted else "acceptance —")
        cost = measured_round_cost(stats, pass_s)
        s["cost"].setText(f"round cost c {cost:.2f}" if cost else "round cost c —")
        self._details()

    def show_drafter(self, kind: str, name: str) -> None:
        """Which kind of drafter the figures are for."""
        label = self.labels["drafter"]
        known = DRAFTER_KINDS.get(kind)
        label.setText(f"drafting: {known.label if known else REMOTE_DRAFTER if kind == 'remote' else kind}")
        label.setToolTip(name)
        self._details()

    def show_thermal(self, reading: ThermalReading) -> None:
        label = self.labels["thermal"]
        label.setText(f"thermal {reading.state.value}")
        label.setToolTip(reading.describe())
        self._details()

    def show_place(self, text: str) -> None:
        """Where replies come from: this machine, or the remote server's box."""
        label = self.labels["place"]
        label.setText(text if len(text) <= 60 else text[:57] + "…")
        label.setToolTip(text)
        self._details()

    def details(self) -> list[str]:
        """The figures off the bar, one line each, as its tooltip lists them."""
        return [self.labels[k].text() for k in KEYS if k not in SHOWN and self.labels[k].text()]

    def _details(self) -> None:
        lines = self.details() or ["No reply yet."]
        self.more.setToolTip("\n".join(lines) + "\n\nThe charts on the right show each reply round by round.")
