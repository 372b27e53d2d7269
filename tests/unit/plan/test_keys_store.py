"""The key store: locations, permissions, atomic files, symlink refusal, import checks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from onstation.core.errors import BadInput
from onstation.plan.keys import KeyStore, atomic_write, default_keys_dir
from onstation.plan.signing import SignatureRejected, key_id


def test_default_location_follows_the_environment(tmp_path: Path) -> None:
    assert default_keys_dir({"ONSTATION_KEYS_DIR": str(tmp_path)}) == tmp_path
    assert default_keys_dir({"XDG_CONFIG_HOME": "/x"}) == Path("/x/onstation/keys")
    assert default_keys_dir({}) == Path.home() / ".config" / "onstation" / "keys"


def test_generate_writes_a_0600_private_key_and_derives_the_id(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    info = store.generate("ops")
    private = tmp_path / "keys" / f"{info.key_id}.key"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert info.key_id == key_id(bytes.fromhex(info.public_hex))
    assert [k.key_id for k in store.list()] == [info.key_id]
    assert store.private(info.key_id).public_key() is not None
    assert not list((tmp_path / "keys").glob(".*tmp"))


def test_private_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    os.chmod(tmp_path, 0o700)
    info = store.generate()
    os.chmod(tmp_path / f"{info.key_id}.key", 0o644)
    with pytest.raises(BadInput, match="readable by others"):
        store.private(info.key_id)


def test_group_writable_directory_is_refused(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o770)  # noqa: S103 - the unsafe mode under test
    with pytest.raises(BadInput, match="writable by group"):
        KeyStore(tmp_path).generate()


def test_symlinked_directory_and_files_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(BadInput, match="symlink"):
        KeyStore(tmp_path / "link").generate()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (real / "target").symlink_to(victim)
    with pytest.raises(BadInput, match="symlink"):
        atomic_write(real / "target", b"overwrite")
    assert victim.read_text() == "keep"


def test_import_public_accepts_exported_keys_and_refuses_small_order(tmp_path: Path) -> None:
    source = KeyStore(tmp_path / "a")
    info = source.generate()
    exported = (
        f'{{"algorithm": "ed25519", "keyId": "{info.key_id}", "publicKey": "{info.public_hex}"}}'
    )
    target = KeyStore(tmp_path / "b")
    imported = target.import_public(exported)
    assert imported.key_id == info.key_id and not imported.has_private
    assert target.trusted() == {info.key_id: bytes.fromhex(info.public_hex)}
    with pytest.raises(SignatureRejected, match="small-order"):
        target.import_public("01" + "00" * 31)
    with pytest.raises(BadInput, match="does not derive"):
        target.import_public(exported.replace(info.key_id, "ed25519-" + "0" * 32))
    assert len(target.list()) == 1


def test_choosing_a_key(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "k")
    with pytest.raises(BadInput, match="no signing key"):
        store.private()
    store.generate()
    store.generate()
    with pytest.raises(BadInput, match="name one with --key"):
        store.private()


def test_a_named_private_key_still_checks_the_directory(tmp_path: Path) -> None:
    """private(KID) reads only that key (issue 14), and still refuses a directory others can
    write to, as listing the keys did."""
    store = KeyStore(tmp_path / "keys")
    info = store.generate()
    assert store.private(info.key_id).public_key() is not None
    (tmp_path / "keys").chmod(0o770)
    with pytest.raises(BadInput, match="writable by group or others"):
        store.private(info.key_id)
