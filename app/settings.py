"""Preferences in QSettings: read when the window opens, written when it closes."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QByteArray, QSettings

from engine import AUTO, Depth, parse_depth

ORGANIZATION = "Draftlight"
APPLICATION = "Draftlight"


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
    theme: str = "system"  # "system" (followed live), "light" or "dark"


def _settings() -> QSettings:
    return QSettings(ORGANIZATION, APPLICATION)


def load() -> Preferences:
    s = _settings()
    p = Preferences()
    p.target = str(s.value("models/target", p.target))
    p.drafter = str(s.value("models/drafter", p.drafter))
    p.depth = _depth(s.value("generation/depth", p.depth), p.depth)
    p.temperature = float(s.value("generation/temperature", p.temperature))
    p.max_tokens = int(s.value("generation/max_tokens", p.max_tokens))
    p.thinking = str(s.value("generation/thinking", p.thinking)).lower() == "true"
    p.system_prompt = str(s.value("generation/system_prompt", p.system_prompt))
    p.recent_files = _strings(s.value("models/recent_files", []))
    p.model_folders = _strings(s.value("models/folders", []))
    p.geometry = s.value("window/geometry")
    p.splitter = s.value("window/splitter")
    p.last_conversation = int(s.value("conversations/last", 0))
    place = str(s.value("engine/place", p.engine_place))
    p.engine_place = place if place in ("local", "remote") else "local"
    p.remote_url = str(s.value("engine/remote_url", p.remote_url))
    p.remote_token = str(s.value("engine/remote_token", p.remote_token))
    chosen = str(s.value("appearance/theme", p.theme))
    p.theme = chosen if chosen in ("system", "light", "dark") else "system"
    return p


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
    s.setValue("generation/thinking", p.thinking)
    s.setValue("generation/system_prompt", p.system_prompt)
    s.setValue("models/recent_files", p.recent_files[:8])
    s.setValue("models/folders", p.model_folders)
    if p.geometry is not None:
        s.setValue("window/geometry", p.geometry)
    if p.splitter is not None:
        s.setValue("window/splitter", p.splitter)
    s.setValue("conversations/last", p.last_conversation)
    s.setValue("engine/place", p.engine_place)
    s.setValue("engine/remote_url", p.remote_url)
    s.setValue("engine/remote_token", p.remote_token)
    s.setValue("appearance/theme", p.theme)
    s.sync()


def _strings(value) -> list[str]:
    """A list QSettings gives back as a list, a single string, or nothing."""
    return [str(x) for x in value] if isinstance(value, list) else ([str(value)] if value else [])
