"""The signer key store: Ed25519 keys kept outside the workspace, private files 0600.

Location: ``$ONSTATION_KEYS_DIR``, else ``$XDG_CONFIG_HOME/onstation/keys``, else
``~/.config/onstation/keys``. The directory is created 0700 and refused when it is a
symlink or writable by group or others. Each key is two files named by its key id (derived
from the public key): ``<id>.key`` (PKCS#8 PEM, 0600) and ``<id>.pub`` (JSON with the raw
public key in hex). Imported public keys (``keys import-public``) get only the ``.pub``
file, after the small-order and canonical-encoding checks. Files are written atomically
(exclusive temp file + fsync + rename + directory fsync) and never through a symlink.

The signing key never enters a body's environment: only the orchestrator signs.

Parsing is kept per process (issue 14: a relief used to parse every key file again). Every
use still lists the directory, checks it (a real directory, not a symlink, not writable by
group or others) and reads each file it needs as before (a regular file, never through a
symlink, a private key not readable by group or others): only what is *derived* from a
file's bytes (the public key document's fields, the loaded private key) is kept, under the
key id the file is named by and the SHA-256 of the very bytes just read. A file replaced,
rewritten, chmod'ed or swapped for a symlink is therefore judged afresh at its next use, and
a cached answer is only ever one that those same bytes produced; no timestamp is trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)

from onstation.core.canonical import loads_strict
from onstation.core.errors import BadInput, OnstationError
from onstation.core.names import validate_name
from onstation.plan.signing import ALGORITHM, check_public_key, key_id, public_raw

_V = TypeVar("_V")


def default_keys_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where keys live, from the environment (see the module docstring)."""
    env = os.environ if env is None else env  # read, never copied (every relief asks)
    if env.get("ONSTATION_KEYS_DIR"):
        return Path(env["ONSTATION_KEYS_DIR"])
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "onstation" / "keys"
    return Path.home() / ".config" / "onstation" / "keys"


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` via an exclusive temp file and a rename; never via a symlink."""
    directory = path.parent
    if path.is_symlink():
        raise BadInput(f"{path}: refusing to write through a symlink")
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_regular(path: Path, limit: int = 1 << 20) -> bytes:
    """Read a regular file without following a final symlink, at most ``limit`` bytes.

    The type is checked before the file is opened, so a FIFO or a device planted in the key
    store is refused at once instead of blocking or being read without end.
    """
    from onstation.harness.files import read_bounded

    return read_bounded(path, limit, "key store", follow_symlinks=False)


#: What this process derived from key files' bytes: (key id, SHA-256 of the bytes) ->
#: (public key hex, label) of a ``.pub`` file, or the loaded key of a ``.key`` file. Only
#: files that passed every check are here; see the module docstring.
_PUBLIC_PARSED: dict[tuple[str, bytes], tuple[str, str | None]] = {}
_PRIVATE_PARSED: dict[tuple[str, bytes], Ed25519PrivateKey] = {}
#: A bound on each: a long-lived process that sees many key files keeps at most this many.
_PARSED_MAX = 256


def _remember(cache: dict[tuple[str, bytes], _V], key: tuple[str, bytes], value: _V) -> None:
    if len(cache) >= _PARSED_MAX:
        cache.clear()
    cache[key] = value


@dataclass(frozen=True)
class KeyInfo:
    """One key known to the store."""

    key_id: str
    public_hex: str
    has_private: bool
    label: str | None

    def to_json(self) -> dict[str, Any]:
        """``{"keyId", "algorithm", "publicKey", "private", "label"}``."""
        return {
            "keyId": self.key_id,
            "algorithm": ALGORITHM,
            "publicKey": self.public_hex,
            "private": self.has_private,
            "label": self.label,
        }


class KeyStore:
    """Signer keys in one directory (see the module docstring)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else default_keys_dir()

    def _ensure_dir(self) -> None:
        path = self.directory
        if path.is_symlink():
            raise BadInput(f"keys directory {path} is a symlink; refusing it")
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check_dir()

    def _check_dir(self) -> None:
        info = os.lstat(self.directory)
        if not stat.S_ISDIR(info.st_mode):
            raise BadInput(f"keys directory {self.directory} is not a directory")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise BadInput(
                f"keys directory {self.directory} is writable by group or others; chmod 700 it"
            )

    def _public_doc(self, kid: str, raw: bytes, label: str | None) -> bytes:
        import json

        doc = {"algorithm": ALGORITHM, "keyId": kid, "publicKey": raw.hex(), "label": label}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")

    def generate(self, label: str | None = None) -> KeyInfo:
        """Create a new key pair; returns its info."""
        if label is not None:
            validate_name(label, "label")
        self._ensure_dir()
        private = Ed25519PrivateKey.generate()
        raw = public_raw(private)
        kid = key_id(raw)
        pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        atomic_write(self.directory / f"{kid}.key", pem, 0o600)
        atomic_write(self.directory / f"{kid}.pub", self._public_doc(kid, raw, label), 0o644)
        return KeyInfo(kid, raw.hex(), True, label)

    def import_public(self, text: str | bytes, label: str | None = None) -> KeyInfo:
        """Trust a public key given as exported JSON or 64 hex characters."""
        if label is not None:
            validate_name(label, "label")
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        stripped = text.strip()
        if stripped.startswith("{"):
            doc = loads_strict(stripped, "public key")
            if not isinstance(doc, dict) or doc.get("algorithm") != ALGORITHM:
                raise BadInput(f"public key: algorithm must be {ALGORITHM}")
            hex_text = doc.get("publicKey")
            claimed = doc.get("keyId")
        else:
            hex_text, claimed = stripped, None
        if not isinstance(hex_text, str) or len(hex_text) != 64:
            raise BadInput("public key: must be 64 hex characters (32 bytes)")
        try:
            raw = bytes.fromhex(hex_text)
        except ValueError as exc:
            raise BadInput("public key: not hex") from exc
        check_public_key(raw)
        kid = key_id(raw)
        if claimed is not None and claimed != kid:
            raise BadInput(f"public key: keyId {claimed!r} does not derive from the key ({kid})")
        self._ensure_dir()
        atomic_write(self.directory / f"{kid}.pub", self._public_doc(kid, raw, label), 0o644)
        return KeyInfo(kid, raw.hex(), (self.directory / f"{kid}.key").exists(), label)

    def list(self) -> list[KeyInfo]:
        """Every key (own and imported), by key id."""
        if not self.directory.exists():
            return []
        self._check_dir()
        found: list[KeyInfo] = []
        # The names glob("ed25519-*.pub") matches, in its order, from one directory listing.
        with os.scandir(self.directory) as entries:
            names = sorted(
                e.name for e in entries if e.name.startswith("ed25519-") and e.name.endswith(".pub")
            )
        for name in names:
            path = self.directory / name
            kid = name[: -len(".pub")]
            public_hex, label = self._public_of(path, kid)
            has_private = (self.directory / f"{kid}.key").exists()
            found.append(KeyInfo(kid, public_hex, has_private, label))
        return found

    @staticmethod
    def _public_of(path: Path, kid: str) -> tuple[str, Any]:
        """(public key hex, label) of the ``.pub`` file at ``path``, read now (every check of
        :func:`read_regular`) and parsed unless these very bytes were parsed before."""
        data = read_regular(path)
        known = (kid, hashlib.sha256(data).digest())
        kept = _PUBLIC_PARSED.get(known)
        if kept is not None:
            return kept
        doc = loads_strict(data, str(path))
        raw_hex = doc.get("publicKey") if isinstance(doc, dict) else None
        try:
            matches = isinstance(raw_hex, str) and key_id(bytes.fromhex(raw_hex)) == kid
        except ValueError:
            matches = False
        if not matches or not isinstance(raw_hex, str):
            raise OnstationError(f"{path}: public key does not match its key id")
        label = doc.get("label")
        if label is None or isinstance(label, str):  # immutable: safe to hand out again
            _remember(_PUBLIC_PARSED, known, (raw_hex, label))
        return raw_hex, label

    def trusted(self) -> dict[str, bytes]:
        """Key id -> raw public key, for every key in the store."""
        return {k.key_id: bytes.fromhex(k.public_hex) for k in self.list()}

    def get(self, kid: str) -> KeyInfo:
        """One key by id (``BadInput`` if unknown)."""
        for info in self.list():
            if info.key_id == kid:
                return info
        raise BadInput(f"no key {kid!r} in {self.directory}")

    def private(self, kid: str | None = None) -> Ed25519PrivateKey:
        """The private key ``kid``, or the only private key when ``kid`` is None."""
        if kid is None:
            own = [k for k in self.list() if k.has_private]
            if len(own) != 1:
                raise BadInput(
                    f"--key: {len(own)} signing keys in {self.directory}; name one with --key"
                    if own
                    else f"no signing key in {self.directory}; run: onstation keys generate"
                )
            kid = own[0].key_id
        elif self.directory.exists():
            self._check_dir()  # as list() checks it; the other keys are not read for one kid
        validate_name(kid, "key id")
        path = self.directory / f"{kid}.key"
        info = os.lstat(path) if path.exists() or path.is_symlink() else None
        if info is None:
            raise BadInput(f"no signing key {kid!r} in {self.directory}")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise BadInput(f"{path}: private key readable by others; chmod 600 it")
        data = read_regular(path)
        known = (kid, hashlib.sha256(data).digest())
        kept = _PRIVATE_PARSED.get(known)
        if kept is not None:
            return kept  # these bytes, under this id, passed the checks below before
        key = load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey) or key_id(public_raw(key)) != kid:
            raise OnstationError(f"{path}: not the Ed25519 key {kid}")
        _remember(_PRIVATE_PARSED, known, key)
        return key
