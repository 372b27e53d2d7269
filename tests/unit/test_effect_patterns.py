"""Which tool calls are effects, and the pure parts of their identity (no git repository).

Commands run from a directory that is not a git repository, so nothing here depends on git
state; pushes resolve to ``commit: None`` there (covered in the integration tests).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onstation.core.effects import fingerprint, normalize_destination, normalize_operation
from onstation.core.errors import BadInput
from onstation.harness.effects import (
    DEFAULT_MCP_VERBS,
    DEFAULT_PATTERNS,
    EffectCall,
    EffectPatterns,
    classify_all,
    classify_tool_call,
    patterns_from_mapping,
)


@pytest.fixture
def cwd(tmp_path: Path) -> str:
    return str(tmp_path)


def bash(command: str, cwd: str, patterns: EffectPatterns = DEFAULT_PATTERNS) -> EffectCall | None:
    return classify_tool_call("Bash", {"command": command}, cwd, patterns)


def ops(command: str, cwd: str, patterns: EffectPatterns = DEFAULT_PATTERNS) -> list[str]:
    return [e.operation for e in classify_all("Bash", {"command": command}, cwd, patterns)]


def must(effect: EffectCall | None) -> EffectCall:
    assert effect is not None
    return effect


# --- shell parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "echo 'git push'",
        'echo "x; git push origin main"',
        "echo git push",
        "grep -r 'curl -X POST' .",
        "# git push\nls",
        "cat <<EOF\ngit push origin main\ncurl -X POST http://x\nEOF\necho done",
        "cat <<-'END'\n\tgit push\n\tEND\n",
        "git log --grep='git push'",
        "printf '%s' \"gh pr create\"",
        "git push --dry-run",
        "git push -n origin main",
        "git -C . push --dry-run origin main",
        "gh pr view 3",
        "gh pr list",
        "gh pr create --web",
        "gh pr create --dry-run -t x",
        "gh pr comment 3 --web",
        "gh release list",
        "gh release view v1",
        "gh release download v1",
        "npm install",
        "npm publish --dry-run",
        "npm run publish-docs",
        "curl https://example.com",
        "curl -sSL https://example.com/install.sh",
        "curl -G -d q=1 https://example.com/search",
        "curl -I https://example.com",
        "curl -X GET https://example.com",
        "http example.com",
        "http GET example.com x==1",
        "http localhost",
        "http --offline POST example.com a=1",
        "wget https://example.com/file",
        "wget --spider --method=DELETE https://example.com/x",
        "wget --method=HEAD https://example.com/x",
        "",
        "   ",
    ],
)
def test_read_only_and_quoted_commands_are_not_effects(command: str, cwd: str) -> None:
    assert classify_all("Bash", {"command": command}, cwd) == []


@pytest.mark.parametrize(
    "command",
    [
        "git push origin main",
        "FOO=1 BAR='a b' git push origin main",
        "sudo -u me git push origin main",
        "env GIT_TRACE=1 git push origin main",
        "timeout 30 git push origin main",
        "nohup git push origin main &",
        "/usr/bin/git push origin main",
        "git --no-pager -c core.x=y push origin main",
        "if true; then git push origin main; fi",
        "bash -c 'git push origin main'",
        'sh -ec "git push origin main"',
        "eval git push origin main",
        "echo $(git push origin main)",
        "echo `git push origin main`",
        "git \\\n  push origin main",
        "ls | git push origin main 2>&1 | tee log",
        "git push origin main > /tmp/out 2>&1",
    ],
)
def test_git_push_is_found_through_wrappers_and_operators(command: str, cwd: str) -> None:
    assert ops(command, cwd) == ["git.push"]
    effect = must(bash(command, cwd))
    assert effect.arguments["ref"] == "main"  # not a repository: left as given, never guessed
    assert effect.arguments["commit"] is None


def test_compound_commands_are_split_and_all_listed(cwd: str) -> None:
    command = (
        "npm test && git push origin main; curl -X POST https://a.example/x -d k=v"
        " || gh pr merge 4 -R o/r | cat"
    )
    assert ops(command, cwd) == ["git.push", "http.request", "gh.pr.merge"]
    first = must(bash(command, cwd))
    assert first.operation == "git.push"
    assert [e["operation"] for e in first.evidence["all"]] == [
        "git.push",
        "http.request",
        "gh.pr.merge",
    ]
    single = must(bash("git push origin main", cwd))
    assert "all" not in single.evidence


def test_unbalanced_quotes_fall_back_to_whitespace_split(cwd: str) -> None:
    effect = must(bash("git push origin main 'oops", cwd))
    assert effect.operation == "git.push"
    assert effect.evidence["parse"].startswith("fallback-whitespace")


def test_push_options_are_parsed(cwd: str) -> None:
    assert must(bash("git push -uf origin main", cwd)).arguments["force"] is True
    assert must(bash("git push --force-with-lease=main:abc origin main", cwd)).arguments["force"]
    assert must(bash("git push -o ci.skip origin main", cwd)).arguments["ref"] == "main"
    assert must(bash("git push --repo=origin", cwd)).destination.startswith("git-remote:")
    effect = must(bash("git push --follow-tags origin main", cwd))
    assert effect.arguments["follow_tags"] is True
    assert must(bash("git -C sub push", cwd)).evidence["directory"] == str(Path(cwd) / "sub")


def test_credentials_are_kept_out_of_evidence_and_summary(cwd: str) -> None:
    command = (
        "GH_TOKEN=ghp_secret curl -u user:pw -H 'Authorization: Bearer tok123' "
        "-X POST https://bob:hunter2@api.example.com/x -d a=1"
    )
    effect = must(bash(command, cwd))
    text = json.dumps(effect.evidence) + effect.summary + effect.destination
    for secret in ("ghp_secret", "user:pw", "tok123", "hunter2"):
        assert secret not in text
    assert effect.destination == "https://api.example.com"


# --- gh -----------------------------------------------------------------------------------


def test_gh_repo_spellings_normalize_to_one_destination(cwd: str) -> None:
    spellings = [
        "gh pr merge 7 -R Owner/Repo",
        "gh pr merge 7 --repo owner/repo",
        "gh pr merge 7 --repo=github.com/OWNER/REPO",
        "gh pr merge 7 -R https://github.com/owner/repo.git",
        "gh pr merge '#7' -R git@github.com:Owner/Repo.git",
        "gh pr merge https://github.com/Owner/Repo/pull/7",
        "GH_REPO=owner/repo gh pr merge 7",
    ]
    effects = [must(bash(cmd, cwd)) for cmd in spellings]
    for cmd, effect in zip(spellings, effects, strict=True):
        assert effect.operation == "gh.pr.merge", cmd
        assert effect.destination == "github.com/owner/repo", cmd
        assert effect.arguments == {"pr": 7, "method": None}, cmd


def test_gh_pr_merge_method_and_comment_body(cwd: str, tmp_path: Path) -> None:
    assert must(bash("gh pr merge 1 -R o/r --rebase", cwd)).arguments == {
        "pr": 1,
        "method": "rebase",
    }
    auto = must(bash("gh pr merge 1 -R o/r --merge --auto", cwd))
    assert auto.arguments == {"pr": 1, "method": "merge", "auto": True}
    comment = must(bash("gh pr comment 9 -R o/r --body 'LGTM, thanks'", cwd))
    assert comment.operation == "gh.pr.comment"
    assert comment.arguments == {"pr": 9, "body": "LGTM, thanks"}
    (tmp_path / "body.md").write_text("from a file")
    from_file = must(bash("gh pr comment 9 -R o/r -F body.md", cwd))
    assert from_file.arguments == {"pr": 9, "body": "from a file"}
    other = must(bash("gh pr comment 9 -R o/r -b 'another'", cwd))
    assert other.arguments != comment.arguments


def test_gh_pr_create_and_release_arguments(cwd: str) -> None:
    created = must(
        bash("gh pr create -R o/r --head feat --base main --title 'T' --body 'B' -d", cwd)
    )
    assert created.operation == "gh.pr.create"
    assert created.arguments == {"head": "feat", "base": "main", "title": "T"}
    default_base = must(bash("gh pr create -R o/r -H feat -t T", cwd))
    assert default_base.arguments["base"] is None
    release = must(bash("gh release create v1.2.0 -R o/r --notes 'n' dist/a.tgz", cwd))
    assert (release.operation, release.destination, release.arguments) == (
        "gh.release.create",
        "github.com/o/r",
        {"tag": "v1.2.0"},
    )
    upload = must(bash("gh release upload v1 -R o/r dist/b.zip 'dist/a.tgz#Label' --clobber", cwd))
    assert upload.arguments == {"tag": "v1", "assets": ["a.tgz", "b.zip"]}
    assert must(bash("gh release delete v1 -y -R o/r", cwd)).operation == "gh.release.delete"


# --- npm ----------------------------------------------------------------------------------


def write_package(directory: Path, **extra: Any) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "package.json").write_text(
        json.dumps({"name": "@acme/widget", "version": "1.4.0", **extra})
    )


def test_npm_publish_reads_name_and_version(tmp_path: Path) -> None:
    write_package(tmp_path / "pkg")
    effect = must(bash("npm publish --access public", str(tmp_path / "pkg")))
    assert (effect.operation, effect.destination, effect.arguments) == (
        "npm.publish",
        "https://registry.npmjs.org",
        {"name": "@acme/widget", "version": "1.4.0"},
    )
    from_parent = must(bash("npm publish ./pkg", str(tmp_path)))
    assert from_parent.arguments == effect.arguments
    assert must(bash("cd pkg && npm publish", str(tmp_path))).arguments == effect.arguments
    assert must(bash("pnpm publish --no-git-checks", str(tmp_path / "pkg"))).arguments == (
        effect.arguments
    )
    assert must(bash("yarn npm publish", str(tmp_path / "pkg"))).arguments == effect.arguments


def test_npm_registry_choice(tmp_path: Path) -> None:
    write_package(tmp_path / "a")
    flag = must(bash("npm publish --registry https://npm.example.com/", str(tmp_path / "a")))
    assert flag.destination == "https://npm.example.com"
    write_package(tmp_path / "b", publishConfig={"registry": "https://pc.example.com"})
    assert must(bash("npm publish", str(tmp_path / "b"))).destination == "https://pc.example.com"
    write_package(tmp_path / "c")
    (tmp_path / "c" / ".npmrc").write_text("@acme:registry=https://scoped.example.com\n")
    assert must(bash("npm publish", str(tmp_path / "c"))).destination == (
        "https://scoped.example.com"
    )


def test_npm_publish_of_a_tarball_and_of_a_missing_manifest(tmp_path: Path) -> None:
    src = tmp_path / "src" / "package"
    write_package(src, version="2.0.0")
    tarball = tmp_path / "widget-2.0.0.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(src / "package.json", arcname="package/package.json")
    effect = must(bash(f"npm publish {tarball.name}", str(tmp_path)))
    assert effect.arguments == {"name": "@acme/widget", "version": "2.0.0"}
    missing = must(bash("npm publish", str(tmp_path)))
    assert missing.arguments == {"name": None, "version": None}
    assert missing.evidence["notes"]


# --- HTTP clients -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "method"),
    [
        ("curl -X POST https://api.example.com/items", "POST"),
        ("curl -XPUT https://api.example.com/items", "PUT"),
        ("curl --request=PATCH https://api.example.com/items", "PATCH"),
        ("curl --request delete https://api.example.com/items", "DELETE"),
        ("curl -sS -X DELETE https://api.example.com/items", "DELETE"),
        ("curl -sSX POST https://api.example.com/items", "POST"),
        ("curl -d a=1 https://api.example.com/items", "POST"),
        ("curl --data-raw '{}' https://api.example.com/items", "POST"),
        ("curl --data-binary @/dev/null https://api.example.com/items", "POST"),
        ("curl --data-urlencode q=x https://api.example.com/items", "POST"),
        ("curl -F file=@/dev/null https://api.example.com/items", "POST"),
        ("curl --form name=x https://api.example.com/items", "POST"),
        ("curl --json '{\"a\":1}' https://api.example.com/items", "POST"),
        ("curl -T /dev/null https://api.example.com/items", "PUT"),
        ("curl --url https://api.example.com/items -d x", "POST"),
        ("http POST api.example.com/items", "POST"),
        ("http put api.example.com/items a=1", "PUT"),
        ("http api.example.com/items a=1", "POST"),
        ("http -f api.example.com/items a=1", "POST"),
        ("http api.example.com/items n:=1", "POST"),
        ("https DELETE api.example.com/items", "DELETE"),
        ("xh PATCH api.example.com/items a=1", "PATCH"),
        ("echo '{}' | http api.example.com/items", "POST"),
        ("http --raw '{}' api.example.com/items", "POST"),
        ("wget --method=POST https://api.example.com/items", "POST"),
        ("wget --method DELETE https://api.example.com/items", "DELETE"),
        ("wget --post-data a=1 https://api.example.com/items", "POST"),
        ("wget -qO- --post-data=a=1 https://api.example.com/items", "POST"),
    ],
)
def test_mutating_http_requests(command: str, method: str, cwd: str) -> None:
    effect = must(bash(command, cwd))
    assert effect.operation == "http.request"
    assert effect.arguments["method"] == method
    assert effect.destination in ("https://api.example.com", "http://api.example.com")
    assert effect.arguments["url"].endswith("api.example.com/items")


def test_urls_are_normalized_and_bodies_distinguish(cwd: str) -> None:
    a = must(bash("curl -X POST 'HTTPS://API.Example.com:443/v1/items/#frag' -d x=1", cwd))
    b = must(bash("curl -d x=1 https://api.example.com/v1/items", cwd))
    assert (a.destination, a.arguments) == (b.destination, b.arguments)
    assert a.arguments == {
        "method": "POST",
        "url": "https://api.example.com/v1/items",
        "body": "x=1",
    }
    c = must(bash("curl -d x=2 https://api.example.com/v1/items", cwd))
    assert c.arguments["body"] == "x=2"
    port = must(bash("curl -d x=1 http://api.example.com:8080/v1", cwd))
    assert port.destination == "http://api.example.com:8080"
    query = must(bash("curl -X DELETE 'https://h.example/x?id=1&b=2'", cwd))
    assert query.arguments["url"] == "https://h.example/x?id=1&b=2"
    bare = must(bash("curl -X POST h.example/x", cwd))
    assert bare.arguments["url"] == "http://h.example/x"
    both = must(bash("curl -d a=1 -d b=2 https://h.example/x", cwd))
    assert both.arguments["body"] == "a=1&b=2"


def test_body_files_are_identified_by_content(tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"a": 1}')
    first = must(bash("curl -X POST https://h.example/x -d @payload.json", str(tmp_path)))
    digest = hashlib.sha256(b'{"a": 1}').hexdigest()
    assert first.arguments["body"] == f"file:{payload};sha256:{digest}"
    payload.write_text('{"a": 2}')
    second = must(bash("curl -X POST https://h.example/x -d @payload.json", str(tmp_path)))
    assert second.arguments["body"] != first.arguments["body"]


def test_several_urls_and_curl_next(cwd: str) -> None:
    found = classify_all(
        "Bash", {"command": "curl -d a=1 https://a.example/x https://b.example/y"}, cwd
    )
    assert [e.destination for e in found] == ["https://a.example", "https://b.example"]
    mixed = classify_all(
        "Bash", {"command": "curl https://a.example/x --next -X DELETE https://b.example/y"}, cwd
    )
    assert [(e.arguments["method"], e.destination) for e in mixed] == [
        ("DELETE", "https://b.example")
    ]


def test_httpie_items_and_shorthand(cwd: str) -> None:
    effect = must(bash("http POST :3000/api name=x count:=2 X-Trace:1 q==a", cwd))
    assert effect.destination == "http://localhost:3000"
    assert effect.arguments == {
        "method": "POST",
        "url": "http://localhost:3000/api?q=a",
        "body": ["name=x", "count:=2"],
    }
    assert must(bash("https POST example.com/x", cwd)).destination == "https://example.com"


def test_large_bodies_are_digested(cwd: str) -> None:
    big = "x" * 5000
    effect = must(bash(f"curl -d {big} https://h.example/x", cwd))
    body = effect.arguments["body"]
    assert isinstance(body, dict)
    assert set(body) == {"sha256", "length"}


# --- MCP ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool",
    [
        "mcp__github__create_issue",
        "mcp__slack__sendMessage",
        "mcp__fs__delete-file",
        "mcp__github__merge_pull_request",
        "mcp__slack__postMessage",
        "mcp__jira__CreateTicket",
        "mcp__x__send",
        "mcp__db__get_or_create_user",
        "mcp__gitlab__MergeRequestMerge",
        "mcp__mail__send.email",
    ],
)
def test_mcp_tools_that_create_send_post_delete_or_merge(tool: str, cwd: str) -> None:
    tool_input = {"title": "t", "nested": {"a": [1, 2]}}
    effect = must(classify_tool_call(tool, tool_input, cwd))
    server = tool.split("__")[1]
    name = tool.split("__", 2)[2]
    assert effect.operation == f"mcp.{server}.{name}".lower()
    assert effect.destination == f"mcp:{server}"
    assert effect.arguments == tool_input


@pytest.mark.parametrize(
    "tool",
    [
        "mcp__github__get_issue",
        "mcp__github__list_merge_requests",
        "mcp__blog__get_post",
        "mcp__blog__search_posts",
        "mcp__fs__read_file",
        "mcp__github__list_created_issues",
        "mcp__x__creates_nothing",
        "mcp__sendgrid__status",
        "mcp__broken",
        "Read",
        "Write",
        "Edit",
        "WebFetch",
        "Task",
    ],
)
def test_tools_that_are_not_effects(tool: str, cwd: str) -> None:
    assert classify_tool_call(tool, {"command": "git push origin main"}, cwd) is None


# --- configuration ------------------------------------------------------------------------


def test_config_adds_commands_verbs_and_globs(cwd: str) -> None:
    patterns = patterns_from_mapping(
        {
            "commands": [
                {
                    "name": "deploy",
                    "regex": r"^make deploy(?: ENV=(?P<env>\w+))?",
                    "destination": "prod",
                },
                {"name": "tf", "regex": r"^terraform apply\b"},
            ],
            "mcp_verbs": ["publish"],
            "mcp_tools": ["mcp__pay__*"],
            "mcp_ignore": ["mcp__github__create_draft"],
        }
    )
    deploy = must(bash("cd x && make deploy ENV=staging", cwd, patterns))
    assert (deploy.operation, deploy.destination, deploy.arguments) == (
        "cmd.deploy",
        "prod",
        {"env": "staging"},
    )
    tf = must(bash("terraform   apply -auto-approve", cwd, patterns))
    assert tf.operation == "cmd.tf"
    assert tf.arguments == {"command": "terraform apply -auto-approve"}
    assert tf.destination == f"shell:{cwd}"
    assert classify_tool_call("mcp__npm__publish_package", {}, cwd, patterns) is not None
    assert classify_tool_call("mcp__pay__refund", {}, cwd, patterns) is not None
    assert classify_tool_call("mcp__github__create_draft", {}, cwd, patterns) is None
    assert classify_tool_call("mcp__github__create_issue", {}, cwd, patterns) is not None
    # Built-ins stay on.
    assert ops("git push origin main", cwd, patterns) == ["git.push"]


def test_config_disables_builtins(cwd: str) -> None:
    patterns = patterns_from_mapping({"disable": ["http", "mcp", "git_push"]})
    assert bash("curl -X POST https://h.example/x", cwd, patterns) is None
    assert bash("git push origin main", cwd, patterns) is None
    assert classify_tool_call("mcp__slack__send_message", {}, cwd, patterns) is None
    assert bash("gh pr merge 1 -R o/r", cwd, patterns) is not None
    only_verbs = patterns_from_mapping({"disable": ["mcp"], "mcp_verbs": ["publish"]})
    assert only_verbs.mcp_verbs == ("publish",)
    assert patterns_from_mapping({}) == DEFAULT_PATTERNS
    assert DEFAULT_PATTERNS.mcp_verbs == DEFAULT_MCP_VERBS


@pytest.mark.parametrize(
    ("mapping", "field"),
    [
        ([], "effects"),
        ({"extra": 1}, "effects.extra"),
        ({"disable": "http"}, "effects.disable"),
        ({"disable": ["ftp"]}, "effects.disable[0]"),
        ({"disable": [1]}, "effects.disable[0]"),
        ({"mcp_verbs": ["Send Email"]}, "effects.mcp_verbs[0]"),
        ({"mcp_tools": [""]}, "effects.mcp_tools[0]"),
        ({"mcp_ignore": [None]}, "effects.mcp_ignore[0]"),
        ({"commands": {}}, "effects.commands"),
        ({"commands": ["x"]}, "effects.commands[0]"),
        ({"commands": [{"regex": "x"}]}, "effects.commands[0].name"),
        ({"commands": [{"name": "Bad Name", "regex": "x"}]}, "effects.commands[0].name"),
        ({"commands": [{"name": "a"}]}, "effects.commands[0].regex"),
        ({"commands": [{"name": "a", "regex": "("}]}, "effects.commands[0].regex"),
        ({"commands": [{"name": "a", "regex": "x", "destination": ""}]},
         "effects.commands[0].destination"),
        ({"commands": [{"name": "a", "regex": "x", "dest": "p"}]}, "effects.commands[0].dest"),
        ({"commands": [{"name": "a", "regex": "x"}, {"name": "a", "regex": "y"}]},
         "effects.commands[1].name"),
    ],
)  # fmt: skip
def test_bad_config_names_the_field_in_one_line(mapping: Any, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        patterns_from_mapping(mapping)
    assert caught.value.details["field"] == field
    assert caught.value.message.startswith(f"{field}: ")
    assert "\n" not in caught.value.message


def test_config_field_prefix_is_configurable() -> None:
    with pytest.raises(BadInput, match=r"^hooks\.effects\.disable\[0\]: "):
        patterns_from_mapping({"disable": ["x"]}, where="hooks.effects")


# --- the ledger accepts every identity as produced ----------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Bash", {"command": "git push origin main"}),
        ("Bash", {"command": "gh pr create -R O/R -H a -t x"}),
        ("Bash", {"command": "curl -X POST HTTPS://H.example:443/a/ -d x"}),
        ("Bash", {"command": "npm publish"}),
        ("mcp__Slack__SendMessage", {"channel": "c", "text": "hi"}),
    ],
)
def test_identities_are_already_normalized_for_the_ledger(
    tool: str, tool_input: dict[str, Any], cwd: str
) -> None:
    effect = must(classify_tool_call(tool, tool_input, cwd))
    assert effect.operation == normalize_operation(effect.operation)
    assert effect.destination == normalize_destination(effect.destination)
    assert "\n" not in effect.summary
    json.dumps(effect.evidence)  # evidence is plain JSON
    fingerprint(
        node="n",
        operation=effect.operation,
        destination=effect.destination,
        arguments=effect.arguments,
        approval_slot=None,
    )


# --- never raises -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory that is not a git repository, shared by the property tests."""
    return str(tmp_path_factory.mktemp("scratch"))


_VOCAB = [
    "git", "push", "-C", "..", "origin", "main", "HEAD:refs/heads/x", "+main", ":x", "--tags",
    "-f", "--force-with-lease", "-u", "--delete", "--mirror", "--all", "gh", "pr", "create",
    "merge", "comment", "release", "upload", "-R", "o/r", "npm", "pnpm", "yarn", "publish",
    "curl", "-X", "POST", "-d", "@-", "@nofile", "-F", "--json", "http", "PUT", "a=1", "b:=2",
    ":3000", "wget", "--method", "https://h.example/x", "&&", "||", ";", "|", "&", "(", ")",
    "'", '"', "\\", "$(", "`", "$X", "${Y}", "<<EOF", "EOF", "\n", "#", "cd", "~", "-",
    "bash", "-c", "eval", "env", "sudo", "timeout", "FOO=1", ">", "2>&1", "<", "*", "--",
]  # fmt: skip
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _no_internal_error(found: list[EffectCall]) -> None:
    for effect in found:
        assert isinstance(effect, EffectCall)
        assert "error" not in effect.evidence, effect.evidence
        assert effect.operation == normalize_operation(effect.operation)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_VOCAB), max_size=14).map(" ".join) | st.text(max_size=200))
def test_classification_never_raises_on_arbitrary_commands(scratch: str, command: str) -> None:
    _no_internal_error(classify_all("Bash", {"command": command}, scratch))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["Bash", "shell", "mcp__s__create_x", "mcp__", "Read"]) | st.text(max_size=30),
    st.dictionaries(st.text(max_size=10), _json, max_size=5)
    | st.fixed_dictionaries({"command": _json}),
    st.sampled_from(["scratch", "", "relative/dir", "/nonexistent/dir"]),
)
def test_classification_never_raises_on_arbitrary_tool_input(
    scratch: str, tool: str, tool_input: dict[str, Any], directory: str
) -> None:
    directory = scratch if directory == "scratch" else directory
    _no_internal_error(classify_all(tool, tool_input, directory))
    result = classify_tool_call(tool, tool_input, directory)
    assert result is None or isinstance(result, EffectCall)


def test_odd_inputs_are_not_effects() -> None:
    assert classify_all("Bash", None, "/") == []  # type: ignore[arg-type]
    assert classify_all(None, {}, "/") == []  # type: ignore[arg-type]
    assert classify_all("Bash", {"command": 42}, "/") == []
