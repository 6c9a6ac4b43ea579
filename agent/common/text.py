"""Text from outside (models, servers) made safe to write anywhere.

JSON may carry lone surrogates (`"\\ud800"`): valid in a Python str, but no UTF-8 file,
terminal or pipe accepts them, so one of them would crash the transcript or stdout.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD; the same object when there are none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text
