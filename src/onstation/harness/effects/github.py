"""The GitHub family: ``gh pr create``, ``gh pr merge``, ``gh pr comment`` and ``gh release``.

The destination is the repository as ``host/owner/repo``: from ``--repo``, ``GH_REPO`` or
the git remote ``gh`` would use (``gh repo set-default``, else ``origin``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from onstation.harness.effects.context import (
    EffectCall,
    _parse_opts,
    _Parsed,
    _read_text,
    _Seg,
    _Word,
)
from onstation.harness.effects.git import _SCP_LIKE, _Git, _Repo, _url_form

_GH_PR_VALUE = frozenset(
    {
        "--repo", "--title", "--body", "--body-file", "--base", "--head", "--reviewer",
        "--assignee", "--label", "--milestone", "--project", "--template", "--subject",
        "--match-head-commit", "--author-email", "--notes", "--notes-file", "--target",
        "--discussion-category", "--notes-start-tag", "--latest", "--notes-from-tag",
    }
)  # fmt: skip
_GH_ALIASES: dict[str, dict[str, str]] = {
    "pr create": {
        "-R": "--repo", "-t": "--title", "-b": "--body", "-F": "--body-file", "-B": "--base",
        "-H": "--head", "-r": "--reviewer", "-a": "--assignee", "-l": "--label",
        "-m": "--milestone", "-p": "--project", "-T": "--template", "-w": "--web",
        "-d": "--draft", "-f": "--fill", "-e": "--editor",
    },
    "pr merge": {
        "-R": "--repo", "-b": "--body", "-F": "--body-file", "-t": "--subject", "-m": "--merge",
        "-s": "--squash", "-r": "--rebase", "-d": "--delete-branch", "-A": "--author-email",
    },
    "pr comment": {
        "-R": "--repo", "-b": "--body", "-F": "--body-file", "-w": "--web", "-e": "--editor",
    },
    "release": {
        "-R": "--repo", "-t": "--title", "-n": "--notes", "-F": "--notes-file", "-d": "--draft",
        "-p": "--prerelease", "-y": "--yes",
    },
}  # fmt: skip
_GH_RELEASE_VERBS = frozenset({"create", "upload", "delete", "edit", "delete-asset"})
_PR_URL = re.compile(r"^https?://([^/]+)/([^/]+)/([^/]+)/pull/(\d+)")


def _gh_repo(seg: _Seg, parsed: _Parsed, notes: list[str]) -> tuple[str, _Git | None]:
    explicit = parsed.last("--repo") or seg.env.get("GH_REPO")
    if explicit:
        explicit_slug = _github_slug(explicit)
        if explicit_slug:
            return explicit_slug, None
        notes.append(f"--repo {explicit!r} is not OWNER/REPO")
        return f"github:{explicit}", None
    git = _Git(seg.cwd, deadline=seg.ctx.deadline)
    repo = _Repo(git)
    remote = "origin"
    # `gh repo set-default` records its choice as remote.<name>.gh-resolved=base.
    for key, values in repo.config_items().items():
        if key.startswith("remote.") and key.endswith(".gh-resolved") and "base" in values:
            remote = key[len("remote.") : -len(".gh-resolved")]
            notes.append(f"repository from remote {remote!r} (gh repo set-default)")
            break
    url = repo.remote_url(remote)
    slug = _github_slug(_url_form(url, seg.cwd)) if url else None
    if slug:
        return slug, git
    notes.append(f"GitHub repository unresolved (remote {remote!r} URL: {url!r})")
    return f"github:unresolved:{seg.cwd or '?'}", git


_SLUG_PART = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$")


def _github_slug(value: str) -> str | None:
    """``host/owner/repo`` (lower case) from OWNER/REPO, HOST/OWNER/REPO or a remote URL."""
    value = value.strip()
    if "://" in value or (_SCP_LIKE.match(value) and "/" in value.split(":", 1)[-1]):
        url = _url_form(value, None)
        if url.startswith("file://"):
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        path = [p for p in parts.path.split("/") if p]
        if not host or len(path) < 2:
            return None
        owner, name = path[0], path[1]
    else:
        path = [p for p in value.split("/") if p]
        if len(path) == 2:
            host, owner, name = "github.com", path[0], path[1]
        elif len(path) == 3:
            host, owner, name = path[0].lower(), path[1], path[2]
        else:
            return None
    name = name[:-4] if name.endswith(".git") else name
    if not (_SLUG_PART.match(owner) and _SLUG_PART.match(name)):
        return None
    return f"{host}/{owner.lower()}/{name.lower()}"


def _current_branch(git: _Git | None, cwd: str | None, deadline: float | None = None) -> str | None:
    git = git or _Git(cwd, deadline=deadline)
    _, head = _Repo(git).head()
    return head[len("refs/heads/") :] if head and head.startswith("refs/heads/") else None


def _classify_gh(seg: _Seg, args: list[_Word]) -> list[EffectCall]:
    texts = [w.text for w in args]
    if len(texts) < 2:
        return []
    noun, verb = texts[0], texts[1]
    rest = args[2:]
    if noun == "pr" and verb in ("create", "new"):
        return _gh_pr_create(seg, rest)
    if noun == "pr" and verb in ("merge", "comment"):
        return _gh_pr_act(seg, verb, rest)
    if noun == "release" and verb in _GH_RELEASE_VERBS:
        return _gh_release(seg, verb, rest)
    return []


def _gh_pr_create(seg: _Seg, rest: list[_Word]) -> list[EffectCall]:
    notes: list[str] = []
    parsed = _parse_opts(rest, _GH_PR_VALUE, _GH_ALIASES["pr create"])
    if parsed.has("--web", "--dry-run"):
        return []  # --web only opens a browser; a person creates the PR there
    dest, git = _gh_repo(seg, parsed, notes)
    head = parsed.last("--head") or _current_branch(git, seg.cwd, seg.ctx.deadline)
    if head is None:
        notes.append("head branch unresolved (detached HEAD or not a repository)")
    base = parsed.last("--base")
    arguments = {"head": head, "base": base, "title": parsed.last("--title")}
    return [
        seg.effect(
            "gh.pr.create",
            dest,
            arguments,
            f"gh pr create in {dest}: {head or '?'} -> {base or 'default branch'}",
            git=git.calls if git else None,
            notes=notes or None,
        )
    ]


def _gh_pr_act(seg: _Seg, verb: str, rest: list[_Word]) -> list[EffectCall]:
    notes: list[str] = []
    parsed = _parse_opts(rest, _GH_PR_VALUE, _GH_ALIASES[f"pr {verb}"])
    if parsed.has("--web"):
        return []
    target = parsed.positionals[0].text if parsed.positionals else None
    dest: str | None = None
    git: _Git | None = None
    pr: int | str | None = None
    if target and (m := _PR_URL.match(target)):
        dest = f"{m.group(1).lower()}/{m.group(2).lower()}/{m.group(3).lower()}"
        pr = int(m.group(4))
    elif target and target.lstrip("#").isdigit():
        pr = int(target.lstrip("#"))
    elif target:
        pr = target  # a branch name: gh finds that branch's pull request
    if dest is None:
        dest, git = _gh_repo(seg, parsed, notes)
    if pr is None:
        # `gh pr merge` with no argument acts on the current branch's PR, exactly as if the
        # branch had been named, so both spellings share one identity.
        pr = _current_branch(git, seg.cwd, seg.ctx.deadline)
        notes.append("no PR given: the pull request of the current branch")
    arguments: dict[str, Any] = {"pr": pr}
    if verb == "merge":
        methods = [m for m in ("merge", "squash", "rebase") if parsed.has(f"--{m}")]
        arguments["method"] = methods[-1] if methods else None
        for flag in ("auto", "disable-auto"):
            if parsed.has(f"--{flag}"):
                arguments[flag.replace("-", "_")] = True
    else:
        body = parsed.last("--body")
        body_file = parsed.last("--body-file")
        if body is None and body_file is not None:
            body = _read_text(body_file, seg.cwd)
            if body is None:
                notes.append(f"body file {body_file!r} unreadable")
        if body is None:
            notes.append("comment body not given on the command line")
        arguments["body"] = body
        for flag in ("edit-last", "delete-last"):
            if parsed.has(f"--{flag}"):
                arguments[flag.replace("-", "_")] = True
    return [
        seg.effect(
            f"gh.pr.{verb}",
            dest,
            arguments,
            f"gh pr {verb} {pr if pr is not None else '?'} in {dest}",
            git=git.calls if git else None,
            notes=notes or None,
        )
    ]


def _gh_release(seg: _Seg, verb: str, rest: list[_Word]) -> list[EffectCall]:
    notes: list[str] = []
    parsed = _parse_opts(rest, _GH_PR_VALUE, _GH_ALIASES["release"])
    dest, git = _gh_repo(seg, parsed, notes)
    pos = [w.text for w in parsed.positionals]
    tag = pos[0] if pos else None
    arguments: dict[str, Any] = {"tag": tag}
    if verb == "upload":
        arguments["assets"] = sorted(os.path.basename(p.split("#", 1)[0]) for p in pos[1:])
    elif verb == "delete-asset":
        arguments["asset"] = pos[1] if len(pos) > 1 else None
    elif verb == "edit":
        arguments["changes"] = {n.lstrip("-"): v for n, v in parsed.opts if n != "--repo"}
    return [
        seg.effect(
            f"gh.release.{verb}",
            dest,
            arguments,
            f"gh release {verb} {tag or '?'} in {dest}",
            git=git.calls if git else None,
            notes=notes or None,
        )
    ]
