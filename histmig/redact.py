"""Secrets out of everything histmig prints or records: a database location (a URL of any
scheme, a libpq connection string) is shown by :func:`location`, a message that may hold one
or quote part of its password (libpq's, a driver's) by :func:`message`; the passwords
themselves, as a driver reads them, are :func:`secrets`. Every place that names a location
(an error, the report's inputs, a progress line, the verdict) goes through here.

A password is hidden however it is written: in a URL's user part up to the last ``@`` (so
``app:sec/ret@host`` and ``app:p@ss@host``, which libpq would misread, are hidden whole), in
a query parameter (``?password=``), or as a connection-string value, quoted (``'a b'``) or
not (up to the next ``keyword=``, so an unquoted ``password=a b`` is hidden whole).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
"""What stands for a hidden secret."""

_SECRET_KEYS = r"(?:\w*password|oauth_client_secret|scram_client_key|scram_server_key)"
"""libpq's connection keywords whose value is a secret (``password``, ``sslpassword``, ...)."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URL = re.compile(_SCHEME.pattern + r"\S*")
_QUERY_PARAM = re.compile(r"([?&][^=&#]*=)([^&#]*)")
_SECRET_KEY = re.compile(_SECRET_KEYS, re.IGNORECASE)
_CONNINFO_SECRET = re.compile(
    rf"((?<![?&\w]){_SECRET_KEYS}\s*=\s*)('(?:[^'\\]|\\.)*'?|.*?(?=\s+\w+\s*=|\s*$))", re.IGNORECASE | re.DOTALL
)
_QUOTED = re.compile(r'"([^"]*)"')


def location(text: str) -> str:
    """``text``, an INPUT (a URL, a connection string, a path), without the secrets it may
    hold: a URL's password left out (its user kept: ``postgresql://app@host/db``), a secret
    query parameter's or connection-string value replaced by :data:`MASK`. A plain path comes back as it is."""
    if _SCHEME.match(text):
        return _url(text)
    return _CONNINFO_SECRET.sub(_conninfo_secret, text)


def secrets(text: str, decoded: bool = True) -> list[str]:
    """The secrets of the location ``text`` as its writer meant them (see the module
    docstring): a URL's percent-decoded (``decoded``; else as written, as libpq quotes back a
    value it cannot decode), a quoted value without its quotes and escapes. Empty for a plain
    path."""
    read = unquote if decoded else str
    if scheme := _SCHEME.match(text):
        found = [read(m[2]) for m in _QUERY_PARAM.finditer(text) if _secret_param(m)]
        userinfo, at, _ = _QUERY_PARAM.sub(lambda m: m[1] if _secret_param(m) else m[0], text)[
            scheme.end() :
        ].rpartition("@")
        _, colon, password = userinfo.partition(":")
        return [read(password), *found] if at and colon else found
    return [_unquoted(m[2]) for m in _CONNINFO_SECRET.finditer(text)]


def message(text: str, of: str = "") -> str:
    """``text``, a message that may name locations or quote their parts, without a secret:
    each URL in it (up to a space) and each connection-string secret as :func:`location`
    hides them, and, for the location ``of`` the message is about, each of its
    :func:`secrets`, decoded or as written, and each quoted (``"..."``) piece of one, as libpq
    quotes back a token it cannot parse."""
    hidden = [secret for secret in dict.fromkeys(secrets(of) + secrets(of, decoded=False)) if secret]
    for secret in hidden:  # a secret as a whole word only: a short one is not every letter of its kind
        text = re.sub(rf"(?<!\w){re.escape(secret)}(?!\w)", MASK, text)
    text = _QUOTED.sub(lambda m: f'"{MASK}"' if m[1] and any(m[1] in s for s in hidden) else m[0], text)
    text = _URL.sub(lambda m: _url(m[0]), text)
    return _CONNINFO_SECRET.sub(_conninfo_secret, text)


def _conninfo_secret(match: re.Match[str]) -> str:
    """A connection string's secret ``keyword=value`` hidden; one already hidden kept as it
    is, with what follows it (in a message, up to its end)."""
    return match[0] if match[2].startswith(MASK) else match[1] + MASK


def _secret_param(match: re.Match[str]) -> bool:
    """Whether a query parameter of :data:`_QUERY_PARAM` is a secret: its key, percent-decoded
    as libpq decodes it (``pass%77ord`` is ``password``), one of :data:`_SECRET_KEYS`."""
    return _SECRET_KEY.fullmatch(unquote(match[1][1:-1])) is not None


def _query_secret(match: re.Match[str]) -> str:
    """A URL's query parameter, its value hidden when it is a secret; one already hidden kept
    with what follows it (in a message, the ``:`` before the text about it)."""
    if not _secret_param(match) or match[2] in (MASK, MASK + ":"):
        return match[0]
    return match[1] + MASK


def _url(url: str) -> str:
    """The URL ``url`` with its password and secret query parameters hidden."""
    url = _QUERY_PARAM.sub(_query_secret, url)
    start = _SCHEME.match(url).end()  # type: ignore[union-attr]
    at = url.rfind("@", start)
    if at < 0:
        return url
    return url[:start] + url[start:at].partition(":")[0] + url[at:]


def _unquoted(value: str) -> str:
    """A connection-string value as libpq reads it: a quoted one without its quotes, ``\\``
    escaping the next character."""
    if not value.startswith("'"):
        return value
    return re.sub(r"\\(.)", r"\1", value[1:-1] if value.endswith("'") and len(value) > 1 else value[1:])
