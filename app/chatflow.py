"""The conversation in the main window's chat pane: opening one, sending a message, and the reply as
it streams in and ends (finished, stopped, failed, refused or cut by a lost connection)."""

from __future__ import annotations

from app import storeedits
from app.actions import alternative_note
from app.conversations import title_from
from app.messagetags import tag_last_message
from app.remote import uncoloured_note
from app.store import CUT_SHORT, StoredMessage
from app.worker import ReplyRequest
from engine import FinishReason, Message, Replay, RunStats, TokenEvent


class ChatFlow:
    """Part of MainWindow: its conversations and their replies; the window's widgets, store and worker
    signals are its own (app/window.py builds them)."""

    # ---- conversations ----
    def _open_conversations(self) -> None:
        conversations = self.store.conversations()
        if not conversations:
            self.store.new_conversation()
            conversations = self.store.conversations()
        self._fill_conversation_list(conversations)
        wanted = self.prefs.last_conversation
        ids = [c.id for c in conversations]
        self.open_conversation(wanted if wanted in ids else ids[0])

    def _fill_conversation_list(self, conversations=None) -> None:
        shown = self.conversation_tools.visible(conversations or self.store.conversations())
        self.conversations.fill(shown, self.conversation_id)

    def _conversation_chosen(self, conversation_id: int) -> None:
        if self.streaming:
            self._say("A reply is streaming: stop it before switching conversations.")
            self._fill_conversation_list()
            return
        self.open_conversation(conversation_id)

    def open_conversation(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        self.transcript.clear_conversation()
        for m in self.store.messages(conversation_id):
            if m.role == "user":
                self.transcript.add_user(m.content)
            elif m.role == "assistant":
                note = CUT_SHORT if m.interrupted else uncoloured_note(m.tokens, None)
                self.transcript.show_reply(m.tokens, m.stats, m.stopped, alternative_note(m, note), m.above)
            elif m.role == "error":
                self.transcript.add_error(m.content)
            tag_last_message(self.transcript, m.id)
        self.chart_feed.load(conversation_id)  # its replies' figures: another conversation's leave the charts
        self.message_tools.refresh()
        self._fill_conversation_list()

    def new_conversation(self) -> None:
        if self.streaming:
            self._say("A reply is streaming: stop it before starting a new conversation.")
            return
        self.conversation_id = self.store.new_conversation()
        self.open_conversation(self.conversation_id)

    def engine_messages(self) -> list[Message]:
        """The conversation as the model sees it: system prompt, then user/assistant turns."""
        messages = []
        system = self.side.system_text()
        if system:
            messages.append(Message("system", system))
        for m in self.store.messages(self.conversation_id):
            if m.role in ("user", "assistant"):
                messages.append(Message(m.role, m.content))
        return messages

    # ---- sending ----
    def send(self) -> None:
        self.input.setFocus()  # what is typed next goes to the box, whether Send was clicked or pressed
        text = self.input.toPlainText().strip()
        if not text or not self._can_reply():
            return
        self.input.clear()
        self.message_tools.resend_edited()  # an edited message: the conversation is cut where it was
        if not self.store.in_memory:
            self.store_notice = ""  # a database moved aside was said once; memory-only stays said
        if not self.store.messages(self.conversation_id):
            self.store.rename(self.conversation_id, title_from(text))
        message_id = self.store.add_message(self.conversation_id, StoredMessage("user", text))
        self.transcript.add_user(text)
        tag_last_message(self.transcript, message_id)
        self._fill_conversation_list()
        self._request_reply(self.engine_messages())
        self.just_sent = (message_id, text)

    def retry(self) -> None:
        """Ask again for the reply a lost connection cut: the conversation up to its last user message."""
        messages = self.engine_messages()
        while messages and messages[-1].role == "assistant":
            messages.pop()  # the partial reply: kept on screen and on disk, not sent
        if messages and messages[-1].role == "user" and self._can_reply():
            self._request_reply(messages)

    def _can_reply(self) -> bool:
        if self.streaming:
            self._say("A reply is still streaming: press Stop, or wait for it to finish, before sending.")
            return False
        if self.prompt_lab is not None and self.prompt_lab.running:
            self._say("The prompt lab is using the model; your message is kept in the box until it finishes.")
            return False
        if self.pair is None or self.busy:
            self._say("The models are still loading; your message is kept in the box.")
            return False
        return True

    def _request_reply(self, messages: list[Message]) -> None:
        self._say("")
        self.retry_button.hide()
        self.remove_failed_button.hide()
        self.just_sent, self.fit_note = None, ""
        request = ReplyRequest(tuple(messages), self.side.config(), self.side.thinking.isChecked())
        self.measure_control.before_reply(request.config.depth)  # queued ahead of the reply: it plays plain
        self.reply.begin(self.conversation_id)  # on disk from now, marked interrupted until it ends
        self.chart_feed.begin_live()
        self.chart_model.plain_pass_s = self.plain_pass_s()  # prices the p_min what-if
        self.transcript.begin_reply()
        tag_last_message(self.transcript, self.reply.message_id)
        self.streaming = True
        self._update_buttons()
        self.request_reply.emit(request)

    @property
    def reply_tokens(self) -> list[TokenEvent]:
        """The latest reply's tokens, as they arrived."""
        return self.reply.tokens

    def stop(self) -> None:
        if self.streaming:
            self.worker.cancel()
            self._say("Stopping after this round…")

    def _events(self, batch: list) -> None:
        tokens = [e for e in batch if isinstance(e, TokenEvent)]
        self.reply.replay = next((e for e in batch if isinstance(e, Replay)), self.reply.replay)
        if tokens:
            self.reply.add(tokens)
            self.transcript.append_tokens(tokens)
        self.chart_model.add(batch)
        stats = batch[-1] if batch and isinstance(batch[-1], RunStats) else None
        if stats is not None:
            self._finish_reply(stats)

    def _finish_reply(self, stats: RunStats) -> None:
        stopped = stats.finish_reason is FinishReason.CANCELLED
        note = stats.message if stats.finish_reason is FinishReason.CONTEXT_FULL else ""
        note = note or uncoloured_note(self.reply_tokens, self.pair.remote if self.pair else None)
        self.transcript.end_reply(stats, stopped, note)
        self.reply.finish(stats, stopped)
        self.chart_feed.end_live()  # the reply as stored: its figures, and "all" with it
        self.last_reply_stats = stats
        self.streaming = False
        self._show_status(stats)
        self._say("Stopped: the partial reply is kept." if stopped else "")
        self._update_buttons()
        self.reply_finished.emit(stats)

    def _reply_failed(self, message: str) -> None:
        if self.streaming and self.reply_tokens:
            self.transcript.end_reply(None, True, "interrupted by an error")
        if self.streaming:
            self.reply.fail()
        self.streaming = False
        self.transcript.add_error(message)
        self.store.add_message(self.conversation_id, StoredMessage("error", message))
        self.retry_button.show()  # every failed reply can be asked for again, or removed (undoably)
        self.remove_failed_button.show()
        self._update_buttons()
        self.reply_finished.emit(None)

    def _prompt_fitted(self, note: str) -> None:
        self.fit_note = note
        if note:
            self.transcript.say_above_reply(note)  # above the reply it concerns
            self.reply.say_above(note)  # and kept with it: shown when the conversation is opened again
            self._say(note)

    def _message_refused(self, sentence: str) -> None:
        """The newest message cannot fit the context even alone: it leaves the conversation and
        goes back to the box, and the sentence gives the figures. Nothing else is lost."""
        self.reply.fail()
        self.streaming = False
        sent, self.just_sent = self.just_sent, None
        if sent is not None:
            storeedits.delete_message(self.store, self.conversation_id, sent[0])
            if not self.input.toPlainText().strip():
                self.input.setPlainText(sent[1])
        self.open_conversation(self.conversation_id)
        self._say(sentence)
        self._update_buttons()
        self.reply_finished.emit(None)

    def _connection_lost(self, message: str) -> None:
        """A remote engine went away mid-reply (or before it): the sentence, the partial reply, a retry."""
        self._reply_failed(f"{message} What arrived is kept; Retry asks again.")
        self.retry_button.show()

    def _reply_stopped(self) -> None:
        """Stopped before the first token: nothing to keep, nothing went wrong."""
        if self.streaming:
            self.reply.fail()
            self.transcript.end_reply(None, True, "stopped before the reply began")
        self.streaming = False
        self._say("Stopped.")
        self._update_buttons()
        self.reply_finished.emit(None)
