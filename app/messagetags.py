"""Which stored message a place in the transcript belongs to.

Each message is one top-level frame of the transcript's document; the window tags a frame
with its message's id when it is drawn, so the actions find the message under the mouse or
the text cursor without knowing how the transcript renders a message inside its frame.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtGui import QTextFormat, QTextFrame
from PySide6.QtWidgets import QTextEdit

MESSAGE_PROPERTY = QTextFormat.Property.UserProperty + 20  # on a message's frame: its id in the store


def tag_last_message(transcript: QTextEdit, message_id: int | None) -> None:
    """Mark the frame drawn last as the message `message_id`."""
    frames = transcript.document().rootFrame().childFrames()
    if frames and message_id:
        frame = frames[-1]
        fmt = frame.frameFormat()
        fmt.setProperty(MESSAGE_PROPERTY, int(message_id))
        frame.setFrameFormat(fmt)


def message_frames(transcript: QTextEdit) -> list[tuple[int, QTextFrame]]:
    """(message id, frame) for every tagged message, in order."""
    out = []
    for frame in transcript.document().rootFrame().childFrames():
        mid = frame.frameFormat().property(MESSAGE_PROPERTY)
        if mid:
            out.append((int(mid), frame))
    return out


def message_at_position(transcript: QTextEdit, position: int) -> int | None:
    for mid, frame in message_frames(transcript):
        if frame.firstPosition() <= position <= frame.lastPosition():
            return mid
    return None


def message_at(transcript: QTextEdit, point: QPoint) -> int | None:
    """The id of the message under a point of the viewport, or None (between messages, or untagged)."""
    return message_at_position(transcript, transcript.cursorForPosition(point).position())


def point_in(transcript: QTextEdit, message_id: int) -> QPoint | None:
    """A viewport point inside the message's frame (its first line): where a click or a context menu lands."""
    for mid, frame in message_frames(transcript):
        if mid == message_id:
            cursor = transcript.textCursor()
            cursor.setPosition(frame.firstPosition() + 1)
            return transcript.cursorRect(cursor).center()
    return None
