"""The key store keeps what it parsed per process (issue 14), and every check still holds on
every use: a key file replaced, chmod'ed, swapped for a symlink or removed, and a directory
made unsafe, are seen at the next use although the earlier answer was kept."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onstation.core.errors import BadInput, OnstationError
from onstation.plan import keys as keys_module
from onstation.plan.keys import KeyStore


@pytest.fixture(autouse=True)
def _fresh_parse_cache() -> Iterator[None]:
    keys_module._PUBLIC_PARSED.clear()
    keys_module._PRIVATE_PARSED.clear()
    yield
    keys_module._PUBLIC_PARSED.clear()
    keys_module._PRIVATE_PARSED.clear()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times a public document and a private key were parsed."""
    counts = {"public": 0, "private": 0}
    real_loads, real_pem = keys_module.loads_strict, keys_module.load_pem_private_key

    def loads(*args: Any, **kwargs: Any) -> Any:
        counts["public"] += 1
        return real_loads(*args, **kwargs)

    def pem(*args: Any, **kwargs: Any) -> Any:
        counts["private"] += 1
        return real_pem(*args, **kwargs)

    monkeypatch.setattr(keys_module, "loads_strict", loads)
    monkeypatch.setattr(keys_module, "load_pem_private_key", pem)
    return counts


def _store(tmp_path: Path) -> tuple[KeyStore, str]:
    store = KeyStore(tmp_path / "keys")
    return store, store.generate(label="relief").key_id


def test_a_second_store_parses_nothing_it_already_parsed(
    tmp_path: Path, parses: dict[str, int]
) -> None:
    store, kid = _store(tmp_path)
    first = store.list()
    key = store.private(kid)
    assert parses == {"public": 1, "private": 1}
    again = KeyStore(tmp_path / "keys")  # a later relief builds its own store
    assert again.list() == first
    assert again.private(kid) is key
    assert again.private() is key
    assert parses == {"public": 1, "private": 1}


def test_a_new_key_is_parsed_and_listed(tmp_path: Path, parses: dict[str, int]) -> None:
    store, kid = _store(tmp_path)
    store.list()
    other = store.generate(label="second").key_id
    listed = KeyStore(tmp_path / "keys").list()
    assert sorted(k.key_id for k in listed) == sorted([kid, other])
    assert parses["public"] == 2


def test_a_private_key_chmodded_after_use_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.private(kid)
    os.chmod(tmp_path / "keys" / f"{kid}.key", 0o644)
    with pytest.raises(BadInput, match="readable by others"):
        KeyStore(tmp_path / "keys").private(kid)


def test_a_private_key_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.private(kid)
    path = tmp_path / "keys" / f"{kid}.key"
    elsewhere = tmp_path / "elsewhere.key"
    shutil.copy2(path, elsewhere)  # the same bytes, the same mode
    path.unlink()
    path.symlink_to(elsewhere)
    # The link itself is judged (lstat: mode 0777), never what it points to.
    with pytest.raises(BadInput, match=r"readable by others|key store"):
        KeyStore(tmp_path / "keys").private(kid)


def test_a_public_file_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.list()
    path = tmp_path / "keys" / f"{kid}.pub"
    elsewhere = tmp_path / "elsewhere.pub"
    shutil.copy2(path, elsewhere)
    path.unlink()
    path.symlink_to(elsewhere)
    with pytest.raises(BadInput, match="key store"):
        KeyStore(tmp_path / "keys").list()


def test_a_private_key_replaced_by_another_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.private(kid)
    other = store.generate().key_id
    keys_dir = tmp_path / "keys"
    os.replace(keys_dir / f"{other}.key", keys_dir / f"{kid}.key")
    with pytest.raises(OnstationError, match="not the Ed25519 key"):
        KeyStore(keys_dir).private(kid)


def test_a_public_file_rewritten_to_another_key_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.list()
    other = store.generate().key_id
    keys_dir = tmp_path / "keys"
    os.replace(keys_dir / f"{other}.pub", keys_dir / f"{kid}.pub")
    with pytest.raises(OnstationError, match="does not match its key id"):
        KeyStore(keys_dir).list()


def test_removed_files_are_seen(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    assert store.list()[0].has_private
    store.private(kid)
    (tmp_path / "keys" / f"{kid}.key").unlink()
    again = KeyStore(tmp_path / "keys")
    assert [k.has_private for k in again.list()] == [False]
    with pytest.raises(BadInput, match="no signing key"):
        again.private(kid)
    (tmp_path / "keys" / f"{kid}.pub").unlink()
    assert again.list() == []


def test_a_directory_made_unsafe_after_use_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.list()
    store.private(kid)
    os.chmod(tmp_path / "keys", 0o770)  # noqa: S103 - the unsafe mode under test
    with pytest.raises(BadInput, match="writable by group"):
        KeyStore(tmp_path / "keys").list()
    with pytest.raises(BadInput, match="writable by group"):
        KeyStore(tmp_path / "keys").private(kid)


def test_a_directory_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    store, kid = _store(tmp_path)
    store.list()
    store.private(kid)
    os.rename(tmp_path / "keys", tmp_path / "real")
    (tmp_path / "keys").symlink_to(tmp_path / "real")
    with pytest.raises(BadInput, match="not a directory"):
        KeyStore(tmp_path / "keys").list()
    with pytest.raises(BadInput, match="not a directory"):
        KeyStore(tmp_path / "keys").private(kid)
