"""Text from outside made safe for a terminal: every control sequence and control character removed.

Node outputs, Slurm's records, spec keys, lock and state files may carry escape sequences that
move the cursor, set the window title or write a hyperlink (``ESC ]8;;url``). Whatever reaches a
terminal goes through :func:`plain` first: CSI and the string sequences (OSC, DCS, SOS, PM, APC)
whole, two-character escapes, the C1 controls and every C0 control but tab and newline.
"""

from __future__ import annotations

import re

# ESC [ ... final byte; 8-bit CSI (0x9b) the same.
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
# OSC, DCS, SOS, PM, APC: up to the string terminator (ESC \, 0x9c, or BEL for OSC), or the end.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
# Any other escape: ESC and one byte.
_ESCAPE = r"\x1b[\x20-\x7e]?"
# C0 (but tab and newline), DEL and C1.
_CONTROL = r"[\x00-\x08\x0b-\x1f\x7f-\x9f]"
_SEQUENCES = re.compile(f"{_CSI}|{_STRING}|{_ESCAPE}|{_CONTROL}")


def plain(text: str) -> str:
    """``text`` without control sequences or control characters (tabs and newlines kept)."""
    return _SEQUENCES.sub("", text)


def one_line(text: str) -> str:
    """``text`` as one line: controls removed, every run of whitespace a single space."""
    return " ".join(plain(text).split())
