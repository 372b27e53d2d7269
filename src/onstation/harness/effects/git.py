"""The git family: ``git push`` (and git aliases that push), and the read-only git runner.

A push's identity is (remote URL, destination ref, object pushed), resolved with local,
read-only git commands run by ``_Git`` in the directory the command would run in; the
GitHub family uses the same runner and ``_Repo`` to find a repository.
"""

from __future__ import annotations

import os
import re
from _collections_abc import Mapping, Sequence  # as collections.abc, without collections (hot path)
from typing import Any

from onstation.harness.effects.context import (
    _MAX_DEPTH,
    EffectCall,
    _destination,
    _monotonic,
    _parse_opts,
    _Seg,
    _strip_userinfo,
    _Word,
    _wordset,
)
from onstation.harness.effects.shell import _lex, _LexError, _word_path


class _Git:
    """Read-only git queries in one directory, each recorded for the evidence."""

    def __init__(
        self,
        cwd: str | None,
        global_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> None:
        self.cwd = cwd
        self.global_args = list(global_args)
        self.extra_env = dict(env or {})
        self.deadline = deadline  # time.monotonic() after which no git command is started
        self.calls: list[dict[str, Any]] = []
        self._cache: dict[tuple[str, ...], tuple[int | None, str]] = {}

    def run(self, args: Sequence[str]) -> tuple[int | None, str]:
        key = tuple(args)
        if key in self._cache:
            return self._cache[key]
        argv = ["git", *self.global_args, *args]
        if self.cwd is None:
            result: tuple[int | None, str] = (None, "")
            self.calls.append({"argv": argv, "cwd": None, "error": "working directory unknown"})
            self._cache[key] = result
            return result
        timeout = 5.0
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - _monotonic())
            if timeout <= 0:
                result = (None, "")
                self.calls.append({"argv": argv, "cwd": self.cwd, "error": "out of time"})
                self._cache[key] = result
                return result
        import subprocess

        from onstation.harness.evidence import run_captured

        # The agent's own environment, not the evidence policy: this predicts what the
        # agent's git will do, so it must see the agent's GIT_* variables.
        env = {
            **os.environ,
            **self.extra_env,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
        }
        record: dict[str, Any] = {"argv": argv, "cwd": self.cwd}
        try:
            code, out, err = run_captured(argv, timeout=timeout, env=env, cwd=self.cwd)
            result = (code, out)
            record["rc"] = code
            if code != 0 and err.strip():
                record["stderr"] = err.strip()[:300]
            elif out:
                record["out"] = out.strip().replace("\x00", "\n")[:300]
        except subprocess.TimeoutExpired:
            result = (None, "")
            record["error"] = "timed out"
        except OSError as exc:
            result = (None, "")
            record["error"] = f"{type(exc).__name__}: {exc.strerror or exc}"
        self.calls.append(record)
        self._cache[key] = result
        return result


class _Repo:
    """The facts about one repository a push resolution needs."""

    def __init__(self, git: _Git) -> None:
        self.git = git
        self._config: dict[str, list[str]] | None = None
        self._head: tuple[bool, str | None] | None = None

    def head(self) -> tuple[bool, str | None]:
        """(is a repository, current branch ref or None when detached)."""
        if self._head is None:
            code, out = self.git.run(["symbolic-ref", "-q", "HEAD"])
            if code == 0:
                self._head = (True, out.strip() or None)
            elif code == 1:
                self._head = (True, None)
            else:
                self._head = (False, None)
        return self._head

    def config(self, key: str) -> str | None:
        values = self.config_all(key)
        return values[-1] if values else None

    def config_all(self, key: str) -> list[str]:
        return self.config_items().get(_config_key(key), [])

    def config_items(self) -> dict[str, list[str]]:
        if self._config is None:
            self._config = {}
            code, out = self.git.run(["config", "-z", "--list"])
            if code == 0:
                for entry in out.split("\x00"):
                    if not entry:
                        continue
                    name, _, value = entry.partition("\n")
                    self._config.setdefault(_config_key(name), []).append(value)
        return self._config

    def full_name(self, src: str) -> str | None:
        if src.startswith("-"):
            return None
        code, out = self.git.run(["rev-parse", "--symbolic-full-name", src])
        name = out.strip()
        return name if code == 0 and name.startswith("refs/") else None

    def object_id(self, src: str) -> str | None:
        if src.startswith("-"):
            return None
        code, out = self.git.run(["rev-parse", "--verify", "--quiet", src])
        sha = out.strip()
        return sha if code == 0 and sha else None

    def refs(self, prefix: str) -> list[tuple[str, str]]:
        code, out = self.git.run(["for-each-ref", "--format=%(refname) %(objectname)", prefix])
        if code != 0:
            return []
        pairs: list[tuple[str, str]] = []
        for line in out.splitlines():
            name, _, sha = line.partition(" ")
            if name and sha:
                pairs.append((name, sha))
        return pairs

    def remote_url(self, name: str) -> str | None:
        if name.startswith("-"):
            return None
        code, out = self.git.run(["remote", "get-url", "--push", name])
        url = out.strip().splitlines()[0] if out.strip() else ""
        return url if code == 0 and url else None


def _config_key(name: str) -> str:
    # Section and variable names are case-insensitive; a subsection (branch, remote) is not.
    first, _, rest = name.partition(".")
    middle, _, last = rest.rpartition(".")
    if not middle:
        return f"{first.lower()}.{last.lower()}"
    return f"{first.lower()}.{middle}.{last.lower()}"


_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^/:]+):(?P<path>.*)$")


def _url_form(url: str, base_dir: str | None) -> str:
    """A git remote location as a URL: scp-like to ``ssh://``, local paths to ``file://``."""
    if "://" in url:
        if url.startswith("file://"):
            return "file://" + os.path.realpath(url[len("file://") :])
        return url
    m = _SCP_LIKE.match(url)
    if m and not url.startswith(("/", ".", "~")) and len(m.group("host")) > 1:
        user = f"{m.group('user')}@" if m.group("user") else ""
        return f"ssh://{user}{m.group('host')}/{m.group('path').lstrip('/')}"
    path = os.path.expanduser(url)
    if not os.path.isabs(path):
        if base_dir is None:
            return url
        path = os.path.join(base_dir, path)
    return "file://" + os.path.realpath(path)


_GIT_GLOBAL_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"}
)
_GIT_PASSTHROUGH = frozenset({"-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
_GIT_KNOWN = _wordset(
    """add am annotate apply archive bisect blame branch bundle cat-file check-ignore checkout
    cherry cherry-pick clean clone commit config count-objects describe diff diff-files
    diff-index diff-tree difftool fetch for-each-ref format-patch fsck gc grep help init
    log ls-files ls-remote ls-tree merge merge-base mv notes pull range-diff rebase reflog
    remote repack replace reset restore rev-list rev-parse revert rm shortlog show show-ref
    sparse-checkout stash status submodule switch symbolic-ref tag update-index update-ref
    var verify-commit version whatchanged worktree"""
)


def _classify_git(seg: _Seg, args: list[_Word], depth: int) -> list[EffectCall]:
    directory = seg.cwd
    global_args: list[str] = []
    i = 0
    while i < len(args):
        text = args[i].text
        if not text.startswith("-"):
            break
        name, eq, value = text.partition("=")
        if name in _GIT_GLOBAL_VALUE and not (eq and name.startswith("--")):
            if i + 1 >= len(args):
                return []
            value_word = args[i + 1]
            value = value_word.text
            i += 2
        else:
            value_word = _Word(value, expands=args[i].expands)
            i += 1
        if name == "-C":
            directory = _word_path(value_word, directory, seg.ctx.deadline) if value else directory
        elif name in _GIT_PASSTHROUGH:
            global_args.extend([name, value] if not name.startswith("--") else [f"{name}={value}"])
    if i >= len(args):
        return []
    sub = args[i].text
    rest = args[i + 1 :]
    git_env = {k: v for k, v in seg.env.items() if k in ("GIT_DIR", "GIT_WORK_TREE")}
    git = _Git(directory, global_args, git_env, seg.ctx.deadline)
    if sub == "push":
        return _classify_push(seg, git, directory, rest)
    if sub in _GIT_KNOWN or sub.startswith("-") or depth >= _MAX_DEPTH:
        return []
    alias = _Repo(git).config(f"alias.{sub}")
    if not alias:
        return []
    if alias.startswith("!"):
        from onstation.harness.effects.classify import _classify_script

        script = alias[1:] + "".join(f" '{w.text}'" for w in rest if "'" not in w.text)
        return _classify_script(script, directory, seg.ctx, depth + 1)
    try:
        toks, _ = _lex(alias)
    except _LexError:
        return []
    alias_words = [t for t in toks if isinstance(t, _Word)]
    if alias_words and alias_words[0].text == "push":
        seg.ctx.notes.append(f"git alias {sub!r} = {alias!r}")
        return _classify_push(seg, git, directory, [*alias_words[1:], *rest])
    return []


_PUSH_VALUE = frozenset(
    {"--repo", "--push-option", "-o", "--receive-pack", "--exec", "--recurse-submodules"}
)
_PUSH_OPTIONAL = frozenset({"--recurse-submodules"})


def _classify_push(
    seg: _Seg, git: _Git, directory: str | None, args: list[_Word]
) -> list[EffectCall]:
    parsed = _parse_opts(
        args,
        _PUSH_VALUE,
        {
            "-n": "--dry-run",
            "-f": "--force",
            "-d": "--delete",
            "-u": "--set-upstream",
            "-q": "--quiet",
            "-v": "--verbose",
            "--branches": "--all",
        },
        optional_value_long=_PUSH_OPTIONAL,
    )
    if parsed.has("--dry-run"):
        return []
    notes: list[str] = []
    force = parsed.has("--force", "--force-with-lease")
    positionals = [w.text for w in parsed.positionals]
    repo = _Repo(git)
    is_repo, head = repo.head()
    if not is_repo:
        notes.append("not a git repository (or its directory is unknown): nothing resolved")
    head_branch = head[len("refs/heads/") :] if head and head.startswith("refs/heads/") else None

    remote = positionals[0] if positionals else parsed.last("--repo")
    refspecs = positionals[1:]
    if remote is None:
        remote = "origin"
        if is_repo:
            for key in (
                f"branch.{head_branch}.pushremote" if head_branch else "",
                "remote.pushdefault",
                f"branch.{head_branch}.remote" if head_branch else "",
            ):
                value = repo.config(key) if key else None
                if value:
                    remote = value
                    notes.append(f"remote {value!r} from {key}")
                    break
    url = repo.remote_url(remote) if is_repo else None
    if url is not None:
        destination = _url_form(url, directory)
    elif "://" in remote or _SCP_LIKE.match(remote) or "/" in remote or remote.startswith("."):
        destination = _url_form(remote, directory)
        notes.append(f"{remote!r} is not a configured remote; taken as a URL or path")
    else:
        destination = f"git-remote:{directory or '?'}#{remote}"
        notes.append(f"remote {remote!r} URL could not be resolved")

    updates: list[dict[str, Any]] = []
    if parsed.has("--mirror"):
        updates.extend(_ref_update(r, sha, force) for r, sha in repo.refs("refs/"))
    if parsed.has("--all"):
        updates.extend(_ref_update(r, sha, force) for r, sha in repo.refs("refs/heads/"))
    if parsed.has("--tags"):
        updates.extend(_ref_update(r, sha, force) for r, sha in repo.refs("refs/tags/"))
    delete = parsed.has("--delete")
    for spec in refspecs:
        if delete:
            updates.append(_delete_update(repo, spec.lstrip("+"), notes))
        else:
            updates.extend(_resolve_refspec(repo, spec, force, head, notes))
    if not refspecs and not parsed.has("--mirror", "--all", "--tags"):
        updates.extend(_default_push(repo, remote, force, head, notes))
    if not is_repo:
        for update in updates:
            update["commit"] = None

    arguments: dict[str, Any]
    unique = {
        (u["ref"] or "", u["commit"] or "", u["force"], u.get("delete", False)): u for u in updates
    }
    ordered = [unique[k] for k in sorted(unique)]
    arguments = dict(ordered[0]) if len(ordered) == 1 else {"refs": ordered}
    for flag, key in (("--follow-tags", "follow_tags"), ("--prune", "prune")):
        if parsed.has(flag):
            arguments[key] = True
    if parsed.has("--mirror"):
        arguments["mirror"] = True
    refs_text = ", ".join(
        f"{'-' if u.get('delete') else ''}{u['ref'] or '?'}@{(u['commit'] or 'unresolved')[:12]}"
        for u in ordered
    )
    destination = _destination(destination)
    return [
        seg.effect(
            "git.push",
            destination,
            arguments,
            f"git push{' --force' if force else ''} to {_strip_userinfo(destination)}: "
            f"{refs_text or 'no refs'}",
            directory=directory,
            # The remote as named (credentials left out): where an observation asks whether
            # the push happened (harness/effects/outcomes.py).
            remote=_strip_userinfo(remote),
            git=git.calls,
            notes=notes + seg.ctx.notes or None,
        )
    ]


def _ref_update(ref: str | None, commit: str | None, force: bool) -> dict[str, Any]:
    return {"ref": ref, "commit": commit, "force": force}


def _delete_update(repo: _Repo, name: str, notes: list[str]) -> dict[str, Any]:
    ref = name if name.startswith("refs/") else None
    if ref is None:
        for prefix in ("refs/heads/", "refs/tags/"):
            if repo.object_id(prefix + name):
                ref = prefix + name
                break
    if ref is None:
        ref = name
        notes.append(f"deleted ref {name!r} not qualified: no local branch or tag of that name")
    update = _ref_update(ref, None, False)
    update["delete"] = True
    return update


def _qualify_dst(dst: str, src_full: str | None, src_is_object: bool) -> str | None:
    if dst.startswith("refs/"):
        return dst
    if src_full and src_full.startswith("refs/tags/"):
        return "refs/tags/" + dst
    if (src_full and src_full.startswith("refs/heads/")) or src_is_object:
        return "refs/heads/" + dst
    return None


def _resolve_refspec(
    repo: _Repo, spec: str, force: bool, head: str | None, notes: list[str]
) -> list[dict[str, Any]]:
    this_force = force or spec.startswith("+")
    spec = spec[1:] if spec.startswith("+") else spec
    src, colon, dst = spec.partition(":")
    if colon and not src:
        update = _ref_update(dst if dst.startswith("refs/") else None, None, this_force)
        if update["ref"] is None:
            return [_delete_update(repo, dst, notes)]
        update["delete"] = True
        return [update]
    if "*" in src:
        return _glob_refspec(repo, src, dst if colon else src, this_force, notes)
    if src in ("HEAD", "@"):
        src_full = head
        if head is None:
            notes.append("HEAD is detached (or the repository is unknown)")
    else:
        src_full = repo.full_name(src)
    commit = repo.object_id(src_full or src)
    if commit is None:
        notes.append(f"source {src!r} does not resolve to an object")
    if colon:
        ref = _qualify_dst(dst, src_full, commit is not None)
        if ref is None:
            ref = dst
            notes.append(f"destination {dst!r} left unqualified: the source kind is unknown")
        elif not dst.startswith("refs/"):
            notes.append(f"destination {dst!r} qualified from the source kind (remote not asked)")
    elif src_full:
        ref = src_full
    else:
        ref = src
        notes.append(f"source {src!r} is not a branch or tag; git needs an explicit destination")
    return [_ref_update(ref, commit, this_force)]


def _glob_refspec(
    repo: _Repo, src: str, dst: str, force: bool, notes: list[str]
) -> list[dict[str, Any]]:
    s_pre, _, s_post = src.partition("*")
    d_pre, star, d_post = dst.partition("*")
    if not star:
        notes.append(f"refspec {src}:{dst} mixes a pattern with a plain ref")
        return [_ref_update(dst, None, force)]
    updates: list[dict[str, Any]] = []
    for name, sha in repo.refs(s_pre.rstrip("/") if s_pre.endswith("/") else s_pre):
        if name.startswith(s_pre) and name.endswith(s_post):
            middle = name[len(s_pre) : len(name) - len(s_post) if s_post else None]
            updates.append(_ref_update(d_pre + middle + d_post, sha, force))
    return updates


def _default_push(
    repo: _Repo, remote: str, force: bool, head: str | None, notes: list[str]
) -> list[dict[str, Any]]:
    configured = repo.config_all(f"remote.{remote}.push")
    if configured:
        notes.append(f"refspecs from remote.{remote}.push")
        out: list[dict[str, Any]] = []
        for spec in configured:
            out.extend(_resolve_refspec(repo, spec, force, head, notes))
        return out
    mode = (repo.config("push.default") or "simple").lower()
    if mode == "matching":
        tracked = {name for name, _ in repo.refs(f"refs/remotes/{remote}/")}
        return [
            _ref_update(name, sha, force)
            for name, sha in repo.refs("refs/heads/")
            if f"refs/remotes/{remote}/{name[len('refs/heads/') :]}" in tracked
        ]
    if head is None:
        notes.append("no refspec and no current branch: git would refuse the push")
        return [_ref_update(None, None, force)]
    if mode == "nothing":
        notes.append("push.default=nothing: git would refuse a push without refspecs")
        return [_ref_update(None, None, force)]
    branch = head[len("refs/heads/") :]
    upstream_remote = repo.config(f"branch.{branch}.remote")
    merge = repo.config(f"branch.{branch}.merge")
    ref = head
    if mode in ("upstream", "tracking", "simple") and upstream_remote == remote and merge:
        ref = merge if merge.startswith("refs/") else f"refs/heads/{merge}"
        if mode == "simple" and ref != head:
            notes.append(f"upstream {ref} differs from {head}: push.default=simple would refuse")
    elif mode in ("upstream", "tracking"):
        notes.append(f"push.default={mode} with no upstream on {remote!r}: git would refuse")
    elif mode == "simple" and upstream_remote is None:
        notes.append("no upstream configured: git may refuse unless push.autoSetupRemote is set")
    notes.append(f"push.default={mode}")
    return [_ref_update(ref, repo.object_id(head), force)]
