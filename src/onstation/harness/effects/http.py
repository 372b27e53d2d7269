"""The HTTP family: mutating requests (POST, PUT, PATCH, DELETE) by curl, httpie, xh and wget.

The identity is the origin, the method, the normalized URL and the body (a file sent as the
body counts by its digest, a large body by its digest and length).
"""

from __future__ import annotations

import re
from typing import Any

from onstation.harness.effects.context import (
    EffectCall,
    _parse_opts,
    _Seg,
    _strip_userinfo,
    _Word,
    _wordset,
)
from onstation.harness.effects.shell import _word_path

_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CURL_VALUE = _wordset(
    """-A -b -c -C -d -D -e -E -F -H -K -m -o -P -Q -r -T -t -u -U -w -X -x -Y -y -z
    --abstract-unix-socket --alt-svc --aws-sigv4 --cacert --capath --cert --cert-type
    --ciphers --config --connect-timeout --connect-to --continue-at --cookie --cookie-jar
    --create-file-mode --crlfile --curves --data --data-ascii --data-binary --data-raw
    --data-urlencode --delegation --dns-interface --dns-ipv4-addr --dns-ipv6-addr
    --dns-servers --doh-url --dump-header --ech --egd-file --engine --etag-compare
    --etag-save --expect100-timeout --form --form-string --ftp-account
    --ftp-alternative-to-user --ftp-method --ftp-port --happy-eyeballs-timeout-ms --header
    --hostpubmd5 --hostpubsha256 --hsts --interface --ip-tos --ipfs-gateway --json
    --keepalive-cnt --keepalive-time --key --key-type --krb --libcurl --limit-rate
    --local-port --login-options --mail-auth --mail-from --mail-rcpt --max-filesize
    --max-redirs --max-time --netrc-file --noproxy --oauth2-bearer --output --output-dir
    --parallel-max --pass --pinnedpubkey --preproxy --proto --proto-default --proto-redir
    --proxy --proxy-cacert --proxy-capath --proxy-cert --proxy-cert-type --proxy-ciphers
    --proxy-crlfile --proxy-header --proxy-key --proxy-key-type --proxy-pass
    --proxy-pinnedpubkey --proxy-service-name --proxy-tls13-ciphers --proxy-tlsauthtype
    --proxy-tlspassword --proxy-tlsuser --proxy-user --proxy1.0 --pubkey --quote --random-file
    --range --rate --referer --request --request-target --resolve --retry --retry-delay
    --retry-max-time --sasl-authzid --service-name --socks4 --socks4a --socks5
    --socks5-gssapi-service --socks5-hostname --speed-limit --speed-time --stderr
    --telnet-option --tftp-blksize --time-cond --tls-max --tls13-ciphers --tlsauthtype
    --tlspassword --tlsuser --trace --trace-ascii --trace-config --unix-socket --upload-file
    --url --url-query --user --user-agent --variable --write-out"""
)
_CURL_ALIASES = {
    "-X": "--request", "-d": "--data", "-F": "--form", "-T": "--upload-file", "-G": "--get",
    "-I": "--head", "-H": "--header", "-u": "--user",
}  # fmt: skip
_CURL_DATA = ("--data", "--data-ascii", "--data-binary", "--data-raw", "--data-urlencode", "--json")
_BODY_LIMIT = 4096


def _body_value(value: str, cwd: str | None, *, file_prefix: str, notes: list[str]) -> str:
    """A body part, with ``@file`` replaced by the file's digest (its content is the body)."""
    if not value.startswith(file_prefix):
        return value
    path = value[len(file_prefix) :]
    if path == "-":
        notes.append("body read from stdin: its content is not part of the identity")
        return "stdin:"
    return _file_digest(path, cwd, notes)


def _file_digest(path: str, cwd: str | None, notes: list[str]) -> str:
    import hashlib

    full = _word_path(_Word(path), cwd) or path
    digest = hashlib.sha256()
    try:
        with open(full, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 16), b""):
                digest.update(chunk)
    except OSError as exc:
        notes.append(f"body file {full!r} unreadable ({type(exc).__name__})")
        return f"file:{full}"
    return f"file:{full};sha256:{digest.hexdigest()}"


def _body(parts: list[str]) -> Any:
    if not parts:
        return None
    body: Any = parts[0] if len(parts) == 1 else parts
    if len(str(body)) > _BODY_LIMIT:
        import hashlib
        import json

        raw = json.dumps(body, ensure_ascii=False).encode()
        return {"sha256": hashlib.sha256(raw).hexdigest(), "length": len(raw)}
    return body


def _normalize_url(url: str, default_scheme: str = "http") -> tuple[str, str] | None:
    """(origin, normalized URL): lower-case scheme and host, no default port or fragment."""
    from urllib.parse import urlsplit, urlunsplit

    url = url.strip()
    if not url:
        return None
    if "://" not in url:
        url = f"{default_scheme}://{url}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not host:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and {"http": 80, "https": 443}.get(scheme) != port:
        netloc = f"{netloc}:{port}"
    origin = f"{scheme}://{netloc}"
    path = parts.path.rstrip("/")
    return origin, urlunsplit((scheme, netloc, path, parts.query, ""))


def _http_effects(
    seg: _Seg,
    client: str,
    method: str,
    urls: list[str],
    body: Any,
    notes: list[str],
    default_scheme: str = "http",
) -> list[EffectCall]:
    out: list[EffectCall] = []
    for raw in urls:
        normalized = _normalize_url(raw, default_scheme)
        if normalized is None:
            notes.append(f"URL {_strip_userinfo(raw)!r} unparseable")
            origin, url = f"url:{raw}", raw
        else:
            origin, url = normalized
        out.append(
            seg.effect(
                "http.request",
                origin,
                {"method": method, "url": url, "body": body},
                f"{client} {method} {url}",
                notes=list(notes) or None,
            )
        )
    return out


def _classify_curl(seg: _Seg, args: list[_Word]) -> list[EffectCall]:
    groups: list[list[_Word]] = [[]]
    for word in args:  # --next starts a new set of per-URL options
        if word.text in ("--next", "-:"):
            groups.append([])
        else:
            groups[-1].append(word)
    found: list[EffectCall] = []
    for group in groups:
        parsed = _parse_opts(group, _CURL_VALUE, _CURL_ALIASES)
        notes: list[str] = []
        urls = [w.text for w in parsed.positionals] + parsed.values("--url")
        data = [
            _body_value(v, seg.cwd, file_prefix="@", notes=notes) if n != "--data-raw" else v
            for n, v in parsed.opts
            if n in _CURL_DATA and v is not None
        ]
        form = [
            _form_value(v, seg.cwd, notes) if n == "--form" else v
            for n, v in parsed.opts
            if n in ("--form", "--form-string") and v is not None
        ]
        upload = parsed.last("--upload-file")
        explicit = parsed.last("--request")
        if explicit:
            method = explicit.upper()
        elif parsed.has("--head"):
            method = "HEAD"
        elif upload is not None:
            method = "PUT"
        elif parsed.has("--get"):
            method = "GET"
        elif data or form:
            method = "POST"
        else:
            method = "GET"
        if method not in _MUTATING or not urls:
            continue
        parts = ["&".join(data)] if data else []
        parts += form
        if upload is not None:
            parts.append(_file_digest(upload, seg.cwd, notes) if upload != "-" else "stdin:")
        found.extend(_http_effects(seg, "curl", method, urls, _body(parts), notes))
    return found


def _form_value(value: str, cwd: str | None, notes: list[str]) -> str:
    name, eq, content = value.partition("=")
    if eq and content.startswith(("@", "<")):
        return f"{name}={_file_digest(content[1:].split(';', 1)[0], cwd, notes)}"
    return value


_HTTPIE_VALUE = _wordset(
    """-a -A -o -p -P -s --auth --auth-type --output --session --session-read-only --verify
    --cert --cert-key --cert-key-pass --timeout --proxy --print --history-print --style
    --max-redirects --default-scheme --raw --boundary --format-options --response-charset
    --response-mime --ssl --ciphers --max-headers"""
)
_HTTPIE_SEP = re.compile(r"(:=@|==|:=|=@|@|=|:)")
_HTTP_METHOD = re.compile(r"^[A-Za-z]+$")
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})


def _classify_httpie(seg: _Seg, prog: str, args: list[_Word]) -> list[EffectCall]:
    parsed = _parse_opts(args, _HTTPIE_VALUE, {"-I": "--ignore-stdin"})
    if parsed.has("--offline"):
        return []
    pos = [w.text for w in parsed.positionals]
    if not pos:
        return []
    method: str | None = None
    if (
        len(pos) >= 2
        and _HTTP_METHOD.match(pos[0])
        and (pos[0].isupper() or pos[0].upper() in _KNOWN_METHODS)
    ):
        method, pos = pos[0].upper(), pos[1:]
    url, items = pos[0], pos[1:]
    notes: list[str] = []
    data: list[str] = []
    query: list[str] = []
    for item in items:
        m = _HTTPIE_SEP.search(item)
        if m is None:
            continue
        sep = m.group(1)
        if sep == "==":
            query.append(item)
        elif sep == ":":
            continue  # a header
        elif sep in ("@", "=@", ":=@"):
            key = item[: m.start()]
            data.append(f"{key}{sep}{_file_digest(item[m.end() :], seg.cwd, notes)}")
        else:
            data.append(item)
    raw = parsed.last("--raw")
    if raw is not None:
        data.append(raw)
    piped = seg.stdin and not parsed.has("--ignore-stdin")
    if piped and not data:
        notes.append("request body from stdin: its content is not part of the identity")
        data.append("stdin:")
    if method is None:
        method = "POST" if data else "GET"
    if method not in _MUTATING:
        return []
    if url.startswith(":"):  # httpie shorthand for localhost
        url = "localhost" + (url if url[1:2] != "/" else url[1:])
    scheme = parsed.last("--default-scheme") or ("https" if prog in ("https", "xhs") else "http")
    if query:
        url += ("&" if "?" in url else "?") + "&".join(q.replace("==", "=", 1) for q in query)
    return _http_effects(seg, prog, method, [url], _body(data), notes, scheme)


_WGET_VALUE = _wordset(
    """-O -o -a -P -e -i -B -t -T -w -U -Q -l -A -R -D -I -X --method --body-data --body-file
    --post-data --post-file --header --user --password --http-user --http-password
    --output-document --output-file --append-output --directory-prefix --execute
    --input-file --base --tries --timeout --wait --user-agent --quota --level --accept
    --reject --domains --include-directories --exclude-directories --referer
    --load-cookies --save-cookies --ca-certificate --certificate --private-key
    --bind-address --limit-rate"""
)


def _classify_wget(seg: _Seg, args: list[_Word]) -> list[EffectCall]:
    parsed = _parse_opts(args, _WGET_VALUE)
    if parsed.has("--spider"):
        return []
    notes: list[str] = []
    method = (parsed.last("--method") or "").upper()
    parts: list[str] = []
    for name, value in parsed.opts:
        if value is None:
            continue
        if name in ("--post-data", "--body-data"):
            parts.append(value)
        elif name in ("--post-file", "--body-file"):
            parts.append(_file_digest(value, seg.cwd, notes))
    if not method:
        method = "POST" if parsed.has("--post-data", "--post-file") else "GET"
    if method not in _MUTATING:
        return []
    urls = [w.text for w in parsed.positionals]
    return _http_effects(seg, "wget", method, urls, _body(parts), notes)
