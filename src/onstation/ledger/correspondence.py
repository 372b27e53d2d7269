"""Correspondence in the ledger: messages between actors and bodies, notes and decisions an
agent records for its successor, and the hand-over documents (briefs, manifests).

Each is bound to a generation where it concerns one body: a message to a fenced generation
is never delivered to its successor, and a note or brief from a fenced body is denied (a
late brief is kept as untrusted evidence).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import Record
from onstation.ledger.backends import Asked, Row, Tx
from onstation.ledger.base import _at, _CommitThenRaise, from_us
from onstation.ledger.ledger import Ledger


@dataclass(frozen=True)
class Message(Record):
    """A message between actors, or to a body."""

    message_id: int
    sender: str
    recipient: str
    kind: str
    body: str
    reply_to: int | None
    created_at: datetime
    delivered_at: datetime | None
    #: The recipient's generation this message concerns (None: whoever holds the identity).
    generation: int | None = None
    #: The generation a node sender wrote it under (None: an actor or operator).
    sender_generation: int | None = None


def _message(r: Row) -> Message:
    return Message(int(r[0]), r[1], r[2], r[3], r[4], None if r[5] is None else int(r[5]),
                   _at(r[6]), from_us(r[7]), None if r[8] is None else int(r[8]),
                   None if r[9] is None else int(r[9]))  # fmt: skip


@dataclass(frozen=True)
class Note(Record):
    """A decision (with its rationale) or a note an agent recorded for its successor."""

    note_id: int
    node: str
    generation: int
    kind: str
    text: str
    rationale: str | None
    at: datetime


@dataclass(frozen=True)
class Document(Record):
    """A turnover brief or continuation manifest, kept exactly as given to a successor."""

    document_id: int
    node: str
    generation: int
    kind: str
    path: str
    content: dict[str, Any]
    digest: str
    at: datetime
    #: Written by a body after its generation was fenced: late, untrusted evidence only.
    late: bool = False


@dataclass(frozen=True)
class StoredObject(Record):
    """A capsule or plan a relief used, kept under its digest."""

    digest: str
    kind: str
    node: str
    body: dict[str, Any]
    at: datetime


def _which_messages(generation: int | None, fenced: bool) -> tuple[str, tuple[int, ...]]:
    """The message queries' suffix and extra parameters for a take (see take_messages)."""
    if generation is None:
        return "all", ()
    if fenced:
        return "generation", (generation,)
    return "for_body", (generation,)


class MessageLook:
    """Whether a message waits for a body, asked inside a unit of work (where, on
    PostgreSQL, its statement travels with the unit's others) and read when the take needs
    it: :meth:`Correspondence.look_for_messages`."""

    __slots__ = ("_asked", "_inserted", "_key")

    def __init__(self, asked: Asked, key: tuple[Any, ...], inserted: int) -> None:
        self._asked = asked
        self._key = key
        self._inserted = inserted


class Correspondence:
    """Messages, notes and documents, over one :class:`Ledger` (same database, same clock)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        #: Messages this object has written (a look taken before one of them is not used).
        self._inserted = 0

    def _q(self, name: str) -> str:
        """The named query ``name`` in the ledger's dialect (see :mod:`.named_queries`)."""
        return self.ledger._q(name)

    # -- messages -----------------------------------------------------------------------------

    def post_message(
        self,
        *,
        sender: str,
        recipient: str,
        kind: str,
        body: str,
        reply_to: int | None = None,
        generation: int | None = None,
        sender_generation: int | None = None,
    ) -> Message:
        """Queue a message for an actor or a node.

        ``generation`` addresses one body of the recipient: the message is delivered to that
        generation only, never to a later one. ``sender_generation`` is the generation a node
        writes under: it is checked like every other write of a body (a stale sender is denied
        with a receipt), except for the one thing a relieved body may still say: its answer to
        the shutdown request addressed to its own generation.
        """
        validate_name(sender, "from")
        validate_name(recipient, "to")
        validate_name(kind, "kind")
        validate_free_text(body, "body", 20_000)
        for value, label in ((generation, "generation"), (sender_generation, "sender generation")):
            if value is not None and not 1 <= value <= 2**63 - 1:
                raise BadInput(f"{label}: must be a positive integer", field=label)

        def run(tx: Tx, now: int) -> Message:
            replied = None
            if reply_to is not None:
                replied = tx.one(self._q("message_replied_to"), (reply_to,))
                if replied is None:
                    raise BadInput(f"--reply-to: no such message {reply_to}")
            if sender_generation is not None:
                own_shutdown = (
                    replied is not None
                    and replied[0] == sender
                    and replied[1] == "shutdown_request"
                    and replied[2] == sender_generation
                )
                if not own_shutdown:
                    self.ledger._guard(tx, now, sender, sender_generation, f"message {kind}")
            return self._insert_message(tx, now, sender=sender, recipient=recipient, kind=kind,
                                        body=body, reply_to=reply_to, generation=generation,
                                        sender_generation=sender_generation)  # fmt: skip

        return self.ledger._write(run)

    def _insert_message(
        self, tx: Tx, now: int, *, sender: str, recipient: str, kind: str, body: str,
        reply_to: int | None, generation: int | None, sender_generation: int | None,
    ) -> Message:  # fmt: skip
        self._inserted += 1
        row = tx.one(
            self._q("message_insert"),
            (sender, recipient, kind, body, reply_to, now, generation, sender_generation),
        )
        assert row is not None
        if reply_to is not None:
            tx.send(self._q("message_mark_answered"), (now, reply_to))
        node = tx.one(self._q("message_recipient_node"), (recipient,))
        self.ledger._event(tx, now, node=None if node is None else recipient,
                           kind="message.sent", generation=generation, actor=sender,
                           message_id=int(row[0]), to=recipient, message_kind=kind,
                           reply_to=reply_to, sender_generation=sender_generation)  # fmt: skip
        return Message(int(row[0]), sender, recipient, kind, body, reply_to, _at(now), None,
                       generation, sender_generation)  # fmt: skip

    def look_for_messages(
        self, recipient: str, *, generation: int | None = None, fenced: bool = False
    ) -> MessageLook:
        """Ask now whether a message waits for what :meth:`take_messages` with the same
        arguments would take; the take reads the answer instead of asking again. Inside a
        unit of work the question travels with the unit's other statements (on PostgreSQL,
        no round trip of its own: issue 14) and sees the unit's writes. A message sent after
        the look waits for the next take, as one sent just after a take does; a message this
        object writes after the look makes the take ask again."""
        validate_name(recipient, "to")
        which, args = _which_messages(generation, fenced)
        waiting = self._q(f"message_waiting_{which}")
        asked = self.ledger._read_single(lambda tx, _now: tx.ask(waiting, (recipient, *args)))
        return MessageLook(asked, (recipient, which, args), self._inserted)

    def take_messages(
        self, recipient: str, *, delivered_to: str, generation: int | None = None,
        fenced: bool = False, look: MessageLook | None = None,
    ) -> list[Message]:  # fmt: skip
        """Every undelivered message for ``recipient``, marked delivered in the same step.

        With ``generation`` (a body taking its messages): the messages addressed to that
        generation, and, unless the body is ``fenced``, those addressed to the identity at
        large. A message for another generation is never handed to this body. ``look``: the
        answer of :meth:`look_for_messages`, used when it was asked for these very messages
        and nothing was written here since.
        """
        validate_name(recipient, "to")
        which, args = _which_messages(generation, fenced)
        # Asked first, outside any write or with the look (issue 14: most takes find
        # nothing, and every full-path hook call takes): a message sent after this look waits
        # for the next take, as one sent just after the take itself would.
        if (
            look is not None
            and look._key == (recipient, which, args)
            and look._inserted == self._inserted
        ):
            found = look._asked.one()
        else:
            waiting = self._q(f"message_waiting_{which}")
            found = self.ledger._read_single(lambda tx, _now: tx.one(waiting, (recipient, *args)))
        if found is None:
            return []
        take = self._q(f"message_take_{which}")

        def run(tx: Tx, now: int) -> list[Message]:
            rows = tx.all(take, (now, delivered_to, recipient, *args))
            return sorted((_message(r) for r in rows), key=lambda m: m.message_id)

        return self.ledger._write(run)

    def expire_messages(self, recipient: str, *, reason: str, generation: int | None = None) -> int:
        """Mark undelivered messages for ``recipient`` as expired (never delivered): those
        addressed to ``generation`` or an earlier one, or all of them.

        What was addressed to the identity at large (an executor's APPROACH, a task note) is
        work of the identity and waits for its next body."""
        validate_name(recipient, "to")

        def run(tx: Tx, now: int) -> int:
            if generation is None:
                return tx.run(self._q("message_expire_all"), (now, f"expired: {reason}", recipient))
            return tx.run(
                self._q("message_expire_through_generation"),
                (now, f"expired: {reason}", recipient, generation),
            )

        return self.ledger._write(run)

    def messages(self, recipient: str) -> list[Message]:
        """Every message for ``recipient``, delivered or not."""
        validate_name(recipient, "to")
        return self.ledger._read_single(
            lambda tx, _now: [
                _message(r) for r in tx.all(self._q("messages_of_recipient"), (recipient,))
            ]
        )

    def open_exchanges(self, node: str) -> list[Message]:
        """APPROACH or CHECKPOINT messages to ``node`` that have no reply yet."""
        validate_name(node, "node")
        return self.ledger._read_single(
            lambda tx, _now: [
                _message(r) for r in tx.all(self._q("message_open_exchanges"), (node,))
            ]
        )

    # -- notes and documents ------------------------------------------------------------------

    def add_note(
        self, node: str, *, kind: str, text: str, rationale: str | None = None, by: str,
        generation: int | None = None,
    ) -> Note:  # fmt: skip
        """Record a decision (with its rationale) or a note.

        ``generation`` is the writing body's: a stale one is denied with a receipt. Without
        it (an operator's note) the note is filed under the current generation.
        """
        validate_name(node, "node")
        if kind not in ("decision", "note"):
            raise BadInput(f"note kind must be decision or note, not {kind!r}")
        validate_free_text(text, "text")
        if not text.strip():
            raise BadInput("note: text must not be empty", field="text")
        if rationale is not None:
            validate_free_text(rationale, "why")

        def body(tx: Tx, now: int) -> Note:
            if generation is not None:
                self.ledger._guard(tx, now, node, generation, f"note {kind}")
            current = self.ledger._lock_node(tx, node)
            row = tx.one(
                self._q("note_insert"),
                (node, current.generation, kind, text, rationale, now),
            )
            assert row is not None
            self.ledger._event(tx, now, node=node, kind=f"note.{kind}",
                               generation=current.generation, actor=by,
                               note_id=int(row[0]))  # fmt: skip
            return Note(int(row[0]), node, current.generation, kind, text, rationale, _at(now))

        return self.ledger._write(body)

    def notes(self, node: str) -> list[Note]:
        """The node's decisions and notes, oldest first."""
        validate_name(node, "node")
        return self.ledger._read_single(
            lambda tx, _now: [
                Note(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], _at(r[6]))
                for r in tx.all(self._q("notes_of_node"), (node,))
            ]
        )

    def record_document(
        self, node: str, *, kind: str, path: str, content: dict[str, Any], by: str,
        generation: int | None = None,
    ) -> Document:  # fmt: skip
        """Keep the JSON form of a brief or manifest, exactly as a successor will get it.

        ``generation`` is the writing body's; without it (the relief's own emergency brief,
        a report) the document is filed under the current generation. A body whose generation
        is stale is denied with a receipt (:class:`StaleGeneration`); a brief it wrote is
        still kept, as late, untrusted evidence (``late``), never as a relief's hand-over.
        """
        validate_name(node, "node")
        text = json.dumps(content, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()

        def insert(tx: Tx, now: int, stamped: int, late: bool) -> Document:
            row = tx.one(
                self._q("document_insert"),
                (node, stamped, kind, path, text, digest, now, 1 if late else 0),
            )
            assert row is not None
            self.ledger._event(tx, now, node=node,
                               kind=f"{kind}.{'late' if late else 'written'}",
                               generation=stamped, actor=by, path=path,
                               document_id=int(row[0]), digest=digest)  # fmt: skip
            return Document(int(row[0]), node, stamped, kind, path, content, digest, _at(now),
                            late)  # fmt: skip

        def body(tx: Tx, now: int) -> Document:
            if generation is not None:
                try:
                    self.ledger._guard(tx, now, node, generation, f"{kind} write")
                except _CommitThenRaise:
                    # The denial receipt is written; a brief is kept as late evidence beside
                    # it, committed together, and the writer is still told it was denied.
                    if kind == "brief":
                        insert(tx, now, generation, True)
                    raise
                return insert(tx, now, generation, False)
            current = self.ledger._lock_node(tx, node)
            return insert(tx, now, current.generation, False)

        return self.ledger._write(body)

    @staticmethod
    def _document(row: Row) -> Document:
        return Document(int(row[0]), row[1], int(row[2]), row[3], row[4], json.loads(row[5]),
                        row[6], _at(row[7]), bool(row[8]))  # fmt: skip

    def latest_document(self, node: str, kind: str) -> Document | None:
        """The newest brief or manifest of ``node`` (late briefs are not hand-overs)."""
        validate_name(node, "node")
        row = self.ledger._read_single(
            lambda tx, _now: tx.one(self._q("document_latest"), (node, kind))
        )
        return None if row is None else self._document(row)

    def late_documents(self, node: str, *, since_id: int = 0) -> list[Document]:
        """Briefs written by fenced bodies after their fence: late, untrusted evidence."""
        validate_name(node, "node")
        return [
            self._document(r)
            for r in self.ledger._read_single(
                lambda tx, _now: tx.all(self._q("documents_late_since"), (node, since_id))
            )
        ]

    def store_object(
        self,
        kind: str,
        node: str,
        digest: str,
        body: dict[str, Any],
        *,
        canonical: bytes | None = None,
    ) -> bool:
        """Keep a capsule or plan under its digest (``kind`` 'capsule' or 'plan'); True when
        it was new. The caller computed the digest (the ledger does not know the formats); the
        same digest is stored once.

        ``canonical``: the body's canonical (RFC 8785) bytes, which the caller holds already;
        they are kept as the stored text instead of encoding the body again, once shown to
        be the body's (decoded, they must equal it: a caller's wrong bytes are refused, never
        stored under the body's digest)."""
        if kind not in _OBJECT_KINDS:
            raise BadInput(f"kind: must be one of {', '.join(_OBJECT_KINDS)}", field="kind")
        validate_name(node, "node")
        if not _DIGEST.fullmatch(digest):
            raise BadInput(f"digest: {digest!r} is not a SHA-256 hex digest", field="digest")
        if canonical is None:
            text = json.dumps(body, sort_keys=True, ensure_ascii=False)
        else:
            text = _text_of(canonical, body)

        def write(tx: Tx, now: int) -> bool:
            # One statement: the node's existence and the digest's novelty are the insert's
            # own conditions; why nothing was stored is asked only when nothing was.
            if tx.one(self._q("stored_object_insert"), (digest, kind, text, now, node)):
                return True
            self.ledger._require_node(tx, node)
            return False

        return self.ledger._write(write)

    def stored_object(self, kind: str, digest: str) -> StoredObject:
        """The stored capsule or plan whose digest is ``digest`` or starts with it (at least
        8 hex digits); BadInput when there is none, or when the prefix names more than one."""
        if kind not in _OBJECT_KINDS:
            raise BadInput(f"kind: must be one of {', '.join(_OBJECT_KINDS)}", field="kind")
        wanted = digest.lower().removeprefix("sha256:")
        if not re.fullmatch(r"[0-9a-f]{8,64}", wanted):
            raise BadInput(f"digest: {digest!r} is not a SHA-256 hex digest or a prefix of at "
                           "least 8 hex digits", field="digest")  # fmt: skip

        def read(tx: Tx, _now: int) -> list[Row]:
            if len(wanted) == 64:
                row = tx.one(self._q("stored_object_by_digest"), (wanted,))
                return [] if row is None or row[1] != kind else [row]
            return tx.all(self._q("stored_objects_by_prefix"), (kind, wanted + "%"))

        rows = self.ledger._read(read)
        if not rows:
            raise BadInput(f"no {kind} with digest {digest} in this ledger", field="digest")
        if len(rows) > 1:
            raise BadInput(f"digest prefix {digest} names more than one {kind}; give more of it",
                           field="digest")  # fmt: skip
        d, k, node, body, at = rows[0]
        return StoredObject(str(d), str(k), str(node), json.loads(body), _at(at))


def _text_of(canonical: bytes, body: dict[str, Any]) -> str:
    """``canonical`` as text, when it is the JSON of ``body`` (decoding costs a fraction of
    encoding it again); BadInput otherwise."""
    try:
        text = canonical.decode("utf-8")
        same = json.loads(text) == body
    except ValueError:  # not UTF-8, not JSON (UnicodeDecodeError, JSONDecodeError)
        same = False
    if not same:
        raise BadInput("canonical: the bytes given are not the object's", field="canonical")
    return text


#: What :meth:`Correspondence.store_object` keeps.
_OBJECT_KINDS = ("capsule", "plan")
_DIGEST = re.compile(r"[0-9a-f]{64}")


__all__ = ["Correspondence", "Document", "Message", "MessageLook", "Note", "StoredObject"]
