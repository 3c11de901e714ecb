"""Preferences in QSettings: read when the window opens, written when it closes."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QByteArray, QSettings

from engine import AUTO, Depth, parse_depth

ORGANIZATION = "Draftlight"
APPLICATION = "Draftlight"
SEND_KEYS = ("return", "cmd-return")  # Return sends; or Cmd-Return (Ctrl-Return) sends and Return starts a line
THEMES = ("system", "light", "dark")


@dataclass
class Preferences:
    target: str = "default"
    drafter: str = "default"
    depth: Depth = AUTO  # where drafts cannot pay on this box, Auto replies run plain on the fastest settings
    temperature: float = 0.0
    max_tokens: int = 512
    thinking: bool = False
    system_prompt: str = ""
    recent_files: list[str] = field(default_factory=list)
    model_folders: list[str] = field(default_factory=list)  # searched for GGUF files besides the usual places
    geometry: QByteArray | None = None
    splitter: QByteArray | None = None
    last_conversation: int = 0
    engine_place: str = "local"  # "local" or "remote"
    remote_url: str = "http://127.0.0.1:8765"
    remote_token: str = ""
    side_splitter: QByteArray | None = None  # the side panel over the charts
    send_key: str = "return"  # one of SEND_KEYS
    theme: str = "system"  # one of THEMES
    text_size: float = 0.0  # the transcript's, in points; 0: the platform's
    context: int = 0  # tokens; 0: Auto, the model's trained length as far as this machine's memory allows


def _settings() -> QSettings:
    return QSettings(ORGANIZATION, APPLICATION)


def load() -> Preferences:
    s = _settings()
    p = Preferences()
    p.target = str(s.value("models/target", p.target))
    p.drafter = str(s.value("models/drafter", p.drafter))
    p.depth = _depth(s.value("generation/depth", p.depth), p.depth)
    p.temperature = _number(s.value("generation/temperature"), float, p.temperature)
    p.max_tokens = _number(s.value("generation/max_tokens"), int, p.max_tokens)
    p.thinking = str(s.value("generation/thinking", p.thinking)).lower() == "true"
    p.system_prompt = str(s.value("generation/system_prompt", p.system_prompt))
    p.recent_files = _strings(s.value("models/recent_files", []))
    p.model_folders = _strings(s.value("models/folders", []))
    p.geometry = _bytes(s.value("window/geometry"))
    p.splitter = _bytes(s.value("window/splitter"))
    p.side_splitter = _bytes(s.value("window/side_splitter"))
    p.last_conversation = _number(s.value("conversations/last"), int, 0)
    p.engine_place = _one_of(s.value("engine/place"), ("local", "remote"), p.engine_place)
    p.remote_url = str(s.value("engine/remote_url", p.remote_url))
    p.remote_token = str(s.value("engine/remote_token", p.remote_token))
    p.send_key = _one_of(s.value("input/send_key"), SEND_KEYS, p.send_key)
    p.theme = _one_of(s.value("appearance/theme"), THEMES, p.theme)
    p.text_size = _number(s.value("appearance/text_size"), float, p.text_size)
    p.context = max(0, _number(s.value("generation/context"), int, p.context))
    return p


def _number(value, kind: type, default):
    """A saved number; anything unreadable (or not finite), the default."""
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if number == number and abs(number) != float("inf") else default


def _one_of(value, choices: tuple[str, ...], default: str) -> str:
    return str(value) if str(value) in choices else default


def _bytes(value) -> QByteArray | None:
    """A saved geometry or splitter state; anything else (a hand-edited file), none."""
    return value if isinstance(value, QByteArray) else None


def _depth(value, default: Depth) -> Depth:
    """A saved depth; -1 is how Auto was saved before it had a name; anything unreadable, the default."""
    if str(value) == "-1":
        return AUTO
    try:
        return parse_depth(str(value))
    except ValueError:
        return default


def save(p: Preferences) -> None:
    s = _settings()
    s.setValue("models/target", p.target)
    s.setValue("models/drafter", p.drafter)
    s.setValue("generation/depth", str(p.depth))
    s.setValue("generation/temperature", p.temperature)
    s.setValue("generation/max_tokens", p.max_tokens)
    s.setValue("generation/context", p.context)
    s.setValue("generation/thinking", p.thinking)
    s.setValue("generation/system_prompt", p.system_prompt)
    s.setValue("models/recent_files", p.recent_files[:8])
    s.setValue("models/folders", p.model_folders)
    if p.geometry is not None:
        s.setValue("window/geometry", p.geometry)
    if p.splitter is not None:
        s.setValue("window/splitter", p.splitter)
    if p.side_splitter is not None:
        s.setValue("window/side_splitter", p.side_splitter)
    s.setValue("conversations/last", p.last_conversation)
    s.setValue("engine/place", p.engine_place)
    s.setValue("engine/remote_url", p.remote_url)
    s.setValue("engine/remote_token", p.remote_token)
    s.setValue("input/send_key", p.send_key)
    s.setValue("appearance/theme", p.theme)
    s.setValue("appearance/text_size", p.text_size)
    s.sync()


def _strings(value) -> list[str]:
    """A list QSettings gives back as a list, a single string, or nothing."""
    return [str(x) for x in value] if isinstance(value, list) else ([str(value)] if value else [])
