"""Secret values (API keys) known to this process: redacted from logs and tool output, kept from
child processes.

Output that is cut (a long line, a command's middle) goes through `clip`: it redacts before it cuts,
and redacts a piece of a key left at a cut edge, so no cut can leave most of a key unrecognised.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

_values: set[str] = set()

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL", re.IGNORECASE)

PIECE = 12
"""Any piece of a registered value this long is redacted too: a provider's error that echoes a
masked key ("sk-proj-abcdefgh***wxyz", a 14-character prefix) must not show that prefix."""


MIN_LENGTH = 8
"""A shorter value is a placeholder, not a secret: never registered, so never redacted nor looked for
inside other values. Registered, `local` (the key setup writes for a keyless local server) would cut
PATH=/usr/local/bin from every child's environment and print "http://***host". 8, not more: a short
key a person chose for a local server (`test-key-1`) is still kept from children and redacted."""

PLACEHOLDERS = frozenset({"local", "ollama", "empty", "none", "null", "dummy", "no-key", "nokey",
                          "not-needed", "unused", "lm-studio", "llama", "vllm", "sk-no-key-required",
                          "sk-dummy", "sk-local", "sk-xxx", "sk-placeholder", "placeholder", "changeme"})
"""The fake keys the usual local servers' docs give (case-insensitive): known to everyone, so no
secret, whatever their length."""


def is_placeholder(value: str) -> bool:
    return len(value.strip()) < MIN_LENGTH or value.strip().lower() in PLACEHOLDERS


def register(values: list[str]) -> None:
    _values.update(v for v in values if v and not is_placeholder(v))


def values() -> frozenset[str]:
    return frozenset(_values)


_RUN = re.compile(r"[A-Za-z0-9+/=_-]{16,}")


def _high_entropy(run: str) -> bool:
    """16+ key characters with upper case, lower case and digits (base64 has them all; a path's
    names rarely: `/Users/Alice/Library/Application` has no digit, `config/gcloud/adc` one case)."""
    return all(any(test(c) for c in run) for test in (str.isupper, str.islower, str.isdigit))


def looks_like_path(value: str) -> bool:
    """A file path (`/home/alice/.config/gcloud/adc.json`, `~/keys`, `C:\\keys\\sa.json`) with no
    key inside it: what a variable named *CREDENTIALS often holds. Registered, its pieces would redact
    the person's home directory from every output."""
    v = value.strip()
    pathish = v.startswith(("/", "~")) or "/" in v or "\\" in v
    return pathish and not any(_high_entropy(run) for run in _RUN.findall(v))


def _key_like(values: frozenset[str]) -> frozenset[str]:
    """The registered values' words whose pieces are redacted too: a key's, not a passphrase's words
    nor a path's names (the whole value is redacted either way)."""
    return frozenset(w for v in values for w in v.split() if len(w) > PIECE and not looks_like_path(w))


_SEED = PIECE // 2
"""Every piece of PIECE characters holds one of the value's SEED-character blocks that start at a
multiple of SEED: those are searched for, then each hit is widened and kept when it reaches PIECE."""
_seeds_of: tuple[frozenset[str], frozenset[str], re.Pattern[str] | None] = (frozenset(), frozenset(), None)


def _seeds() -> tuple[frozenset[str], re.Pattern[str] | None]:
    """The key-like words and the pattern of their seed blocks."""
    global _seeds_of
    now = frozenset(_values)
    if now != _seeds_of[0]:
        words = _key_like(now)
        blocks = sorted({w[i:i + _SEED] for w in words for i in range(0, len(w) - _SEED + 1, _SEED)})
        _seeds_of = (now, words, re.compile("|".join(map(re.escape, blocks))) if blocks else None)
    return _seeds_of[1], _seeds_of[2]


def _widest_piece(text: str, at: int, seed: str, words: frozenset[str]) -> tuple[int, int]:
    """The widest span around text[at:at + SEED] (== seed) that is a piece of one of `words`;
    (at, at) when none is PIECE characters long."""
    best = (at, at)
    for v in words:
        i = v.find(seed)
        while i >= 0:
            a, b, j, k = at, at + _SEED, i, i + _SEED  # widen while text and value agree
            while a > 0 and j > 0 and text[a - 1] == v[j - 1]:
                a, j = a - 1, j - 1
            while b < len(text) and k < len(v) and text[b] == v[k]:
                b, k = b + 1, k + 1
            if b - a >= PIECE and b - a > best[1] - best[0]:
                best = (a, b)
            i = v.find(seed, i + 1)
    return best


def redact(text: str) -> str:
    """`text` with every registered value, and every piece of one at least PIECE characters long,
    replaced by ***."""
    for v in _values:
        if v in text:
            text = text.replace(v, "***")
    words, seeds = _seeds()
    if seeds is None or len(text) < PIECE:
        return text
    out: list[str] = []
    done = 0
    m = seeds.search(text)
    while m is not None:
        start, end = _widest_piece(text, m.start(), m.group(), words)
        if end > start:
            out.append(text[done:max(done, start)] + "***")
            done = end
        m = seeds.search(text, max(end, m.start() + 1))
    return "".join(out) + text[done:] if out else text


def longest() -> int:
    """UTF-8 length of the longest registered secret (how far past a cut a stream must look)."""
    return max((len(v.encode("utf-8")) for v in _values), default=0)


MIN_FRAGMENT = 8
"""A piece of a key this long (or half a shorter key) at a cut edge is redacted too."""


class Clip(NamedTuple):
    head: str
    """The kept start: the whole (redacted) text when nothing was dropped."""
    tail: str
    """The kept end ("" when nothing was dropped)."""
    dropped: int
    """Characters (bytes with in_bytes) of the redacted text left out between head and tail."""


def clip(text: str, head: int, tail: int = 0, *, in_bytes: bool = False,
         cut_before: bool = False, cut_after: bool = False) -> Clip:
    """The first `head` and last `tail` characters (UTF-8 bytes with in_bytes) of the redacted text.
    A key fragment at a cut edge is redacted as well; cut_before/cut_after say the text itself was
    already cut there (a stream's window), so that edge counts even when nothing more is dropped."""
    text = redact(text)
    size = _size(text, in_bytes)
    if size <= head + tail:
        return Clip(_edges(text, cut_before, cut_after), "", 0)
    if in_bytes:  # cut on a character boundary: a partial character at an edge is left out
        data = text.encode("utf-8")
        first = data[:head].decode("utf-8", "ignore")
        last = data[len(data) - tail:].decode("utf-8", "ignore") if tail else ""
    else:
        first, last = text[:head], text[len(text) - tail:] if tail else ""
    dropped = size - _size(first, in_bytes) - _size(last, in_bytes)
    return Clip(_edges(first, cut_before, True), _edges(last, True, cut_after) if tail else "", dropped)


def _size(text: str, in_bytes: bool) -> int:
    return len(text.encode("utf-8")) if in_bytes else len(text)


def _edges(text: str, start: bool, end: bool) -> str:
    """`text` with a key fragment at a cut start or end replaced by ***."""
    if not (start or end) or not text:
        return text
    for v in sorted(_values, key=len, reverse=True):
        least = min(MIN_FRAGMENT, max(4, (len(v) + 1) // 2))
        if start and end and len(text) >= least and text in v:
            return "***"  # the whole window lies inside one key
        if end:
            k = next((k for k in range(min(len(v), len(text)), least - 1, -1) if text.endswith(v[:k])), 0)
            if k:
                text = text[:len(text) - k] + "***"
        if start:
            k = next((k for k in range(min(len(v), len(text)), least - 1, -1) if text.startswith(v[len(v) - k:])), 0)
            if k:
                text = "***" + text[k:]
    return text


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: no variable that names or holds a secret."""
    env = dict(os.environ if base is None else base)
    return {k: v for k, v in env.items() if not is_secret(k, v)}


def is_secret(name: str, value: str) -> bool:
    """A variable no child gets (and `environ_scrub` blanks): its name says secret or its value holds
    a key (`CURL_HDR='Authorization: Bearer KEY'` as much as the key alone)."""
    return bool(SECRET_NAME.search(name)) or any(v in value for v in _values)


def shown_url(url: str) -> str:
    """`url` as the daemon shows it (model lists, --check-config, messages, logs): without the
    userinfo (`https://user:key@host/v1` -> `https://host/v1`)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}" if "@" in authority else url


def url_secrets(url: str | None) -> list[str]:
    """The userinfo of `url` and its password (to register: a log line that quotes the URL whole is
    redacted too)."""
    if not url or "://" not in url:
        return []
    authority = url.partition("://")[2].partition("/")[0]
    if "@" not in authority:
        return []
    userinfo = authority.rpartition("@")[0]
    return [userinfo, userinfo.partition(":")[2]]
