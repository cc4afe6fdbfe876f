"""Slash commands of a ``gdn run`` chat, and the rule that tells a command from a message.

A chat line is a command when its first word is one: ``/help``, ``/attach``, ``/quit`` (``/exit``).
A first word that looks like a command (``/`` then a letter, then letters, digits or ``-``; no
second ``/``) but is none is not sent to the model either, when it is the whole line (``/hlep``) or
is close to a command (``/atach notes.txt``): the user meant a command, and the model would answer
the typo. Anything else goes to the model as typed, slashes included: ``/usr/bin is missing`` (a
path: a second ``/``), ``/tmp is full`` (not close to any command). ``//`` at the start sends the
rest with one ``/`` removed, for the rare message that is a single ``/word``.
"""

from __future__ import annotations

import re

from .._hints import did_you_mean

#: (command, what it does), in the order /help lists them
COMMANDS: tuple[tuple[str, str], ...] = (
    ("/attach FILE[:TYPE]", "send a file with your next message (/attach alone lists them)"),
    ("/help", "list these commands"),
    ("/quit", "end the chat (also /exit or Ctrl+D)"),
)
_NAMES = ("/attach", "/exit", "/help", "/quit")
_COMMAND_WORD = re.compile(r"/[A-Za-z][A-Za-z0-9-]*")


def help_text() -> str:
    width = max(len(command) for command, _ in COMMANDS)
    rows = "".join(f"  {command.ljust(width)}  {what}\n" for command, what in COMMANDS)
    return f"chat commands:\n{rows}  (start a line with // to send a message that begins with /)\n"


def not_utf8(text: str) -> str | None:
    """Where ``text`` is not UTF-8, as ``byte 0xe9 at offset 3``, else ``None``. Python reads
    argv and stdin bytes that are not UTF-8 as lone surrogates (``\\udce9``); sent on, the turn failed
    with E_IPC_NOT_JSON "the event cannot cross the process boundary"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        return f"{what} at offset {len(text[: exc.start].encode('utf-8', 'surrogateescape'))}"
    return None


NOT_UTF8_HINT = (
    "your terminal or the text is not UTF-8 (a Latin-1 locale?): set LANG to a UTF-8 locale, or convert it with iconv"
)


def local_reply(line: str) -> str | None:
    """What to print instead of sending ``line`` (stripped) to the model: the command list for
    ``/help``, a notice for a mistyped command (or ``/quit`` with words after it), a notice for a line
    that is not UTF-8; ``None`` for a message (and for ``/attach``, ``/quit``, ``/exit``, which the
    session handles itself)."""
    where = not_utf8(line)
    if where is not None:
        return f"this line is not UTF-8 text ({where}); not sent: {NOT_UTF8_HINT}\n"
    word, _, rest = line.partition(" ")
    if word == "/help":
        return help_text()
    if word in ("/quit", "/exit") and rest.strip():
        return f"{word} takes no arguments (not sent; {word} alone ends the chat)\n"
    if word in _NAMES or not _COMMAND_WORD.fullmatch(word):
        return None
    hint = did_you_mean(word, _NAMES)
    if rest.strip() and hint is None:
        return None  # "/tmp is full": a message that starts with a slash
    shown = f"/{line}" if len(line) < 40 else f"/{word} ..."
    return (
        f"unknown command {word}"
        + (f"; {hint}" if hint else "")
        + f" (not sent; /help lists the commands, {shown} sends it as a message)\n"
    )


def message_text(line: str) -> str:
    """The text sent for a chat line that is a message: ``//x`` sends ``/x``."""
    return line[1:] if line.startswith("//") else line


__all__ = ["COMMANDS", "NOT_UTF8_HINT", "help_text", "local_reply", "message_text", "not_utf8"]
