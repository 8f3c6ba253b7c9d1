"""Where infopt's credentials may go, and what leaves the machine (issue 17).

- Credentials are scrubbed from third-party processes' environments by name
  (`infopt.environ.is_secret_name`), except those an adapter says it needs.
- The GitHub token goes to https://api.github.com only, unless the request trusts
  `github_url` with it (`github_token_to_url`).
- Issue search sends the search terms of the root error line, never the log, and only when
  `github_search` is on; it says so in one INFO line before sending.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from urllib.parse import parse_qs

import pytest

from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.process import engine_environ
from infopt.environ import is_secret_name, scrubbed
from infopt.troubleshoot.diagnose import diagnose_text
from infopt.troubleshoot.github import search_issues, search_terms, token_allowed
from tests.githubserver import FakeGitHub

SECRET = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
          "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "OPENAI_API_KEY", "PREFECT_API_KEY"]
NOT_SECRET = ["TOKENIZERS_PARALLELISM", "PATH", "OMP_NUM_THREADS", "VLLM_CPU_KVCACHE_SPACE",
              "PREFECT_API_URL"]


@pytest.mark.parametrize("name", SECRET)
def test_credential_names_are_secret(name):
    assert is_secret_name(name) and is_secret_name(name.lower())


@pytest.mark.parametrize("name", NOT_SECRET)
def test_ordinary_names_are_not(name):
    assert not is_secret_name(name)


def test_scrubbed_drops_every_credential_and_keeps_the_rest():
    env = {**{n: "s3cret" for n in SECRET}, **{n: "1" for n in NOT_SECRET}}
    assert scrubbed(env) == {n: "1" for n in NOT_SECRET}


def test_engine_environ_keeps_only_the_secrets_its_adapter_passes():
    env = {"HF_TOKEN": "hf_x", "GITHUB_TOKEN": "ghp_x", "AWS_SECRET_ACCESS_KEY": "aws_x",
           "PATH": "/usr/bin", "OMP_NUM_THREADS": "2"}
    plain = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"}
    assert llamacpp.ADAPTER.passes_secrets == ()
    assert engine_environ(llamacpp.ADAPTER, env) == plain
    # An engine that pulls gated weights itself would name HF_TOKEN: that one, no other.
    pulls = replace(llamacpp.ADAPTER, passes_secrets=("HF_TOKEN",))
    assert engine_environ(pulls, env) == {**plain, "HF_TOKEN": "hf_x"}


@pytest.mark.parametrize("url, trusted, allowed", [
    ("https://api.github.com", False, True),
    ("https://api.github.com/", False, True),
    ("https://API.GITHUB.COM", False, True),
    ("http://api.github.com", False, False),  # cleartext: not even to GitHub
    ("https://api.github.com.evil.example", False, False),
    ("https://evil.example/api.github.com", False, False),
    ("https://api.github.com@evil.example", False, False),
    ("https://ghe.corp.example/api/v3", False, False),
    ("https://ghe.corp.example/api/v3", True, True),  # GitHub Enterprise, trusted explicitly
])
def test_token_goes_to_github_unless_the_url_is_trusted(url, trusted, allowed):
    assert token_allowed(url, trusted) is allowed


# A vLLM start that failed: the environment dump and the model path must not leave; only the
# root error line's distinctive words do.
CANARY = "hf_CANARYd3adb33f"
LOG = f"""INFO 12-01 10:00:00 api_server.py:585] vLLM API server version 0.11.0
INFO 12-01 10:00:00 api_server.py:586] args: model='/home/alice/private-model' api_key='sk-local'
DEBUG env: HF_TOKEN={CANARY} HOSTNAME=alice-workstation
INFO 12-01 10:00:05 gpu_executor.py:122] # GPU blocks: 1478, # CPU blocks: 2048
ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648) for '/home/alice/private-model'. Try increasing `gpu_memory_utilization` or decreasing `max_model_len`
"""


def _queries(gh: FakeGitHub) -> list[str]:
    return [parse_qs(r["query"])["q"][0] for r in gh.requests]


def test_no_search_no_request():
    with FakeGitHub() as gh:
        d = diagnose_text(LOG, "vllm", search=False, github_url=gh.url,
                          github_token="ghp_never", github_token_to_url=True)
    assert gh.requests == []
    assert d.search.startswith("offline: upstream search not requested")
    assert d.root_error.startswith("ValueError")  # the catalog still diagnoses it


def test_the_query_is_the_search_terms_of_the_error_line_only(caplog):
    caplog.set_level(logging.INFO, logger="infopt.troubleshoot.github")
    with FakeGitHub() as gh:
        d = diagnose_text(LOG, "vllm", search=True, github_url=gh.url)
    terms = search_terms(d.root_error)
    assert _queries(gh) == [f"{terms} repo:vllm-project/vllm is:issue"]
    sent = " ".join(r["query"] for r in gh.requests) + " ".join(_queries(gh))
    for private in (CANARY, "alice", "private-model", "sk-local", "HOSTNAME", "29000"):
        assert private not in sent
    assert gh.requests[0]["auth"] is None
    # One INFO line, before sending: where, which repositories, what leaves, how to stop it.
    notices = [r for r in caplog.records if r.name == "infopt.troubleshoot.github"]
    assert len(notices) == 1 and notices[0].levelno == logging.INFO
    line = notices[0].getMessage()
    assert "127.0.0.1" in line and "vllm-project/vllm" in line and terms in line
    assert "error line leave this machine" in line and "github_search: false" in line


def test_token_withheld_from_an_untrusted_url_and_said_once(caplog):
    caplog.set_level(logging.INFO, logger="infopt.troubleshoot.github")
    with FakeGitHub() as gh:
        out = search_issues(LOG.splitlines()[-1], "vllm", base_url=gh.url, token="ghp_secret")
    assert gh.requests and all(r["auth"] is None for r in gh.requests)
    assert out.matches  # searched all the same, unauthenticated
    withheld = "token withheld from 127.0.0.1 (not api.github.com); set github_token_to_url"
    assert withheld in out.status
    lines = [r.getMessage() for r in caplog.records if r.name == "infopt.troubleshoot.github"]
    assert len(lines) == 1 and withheld in lines[0] and "ghp_secret" not in lines[0]


def test_token_sent_to_a_trusted_url():
    with FakeGitHub(token="ghp_trusted") as gh:
        out = search_issues(LOG.splitlines()[-1], "vllm", base_url=gh.url, token="ghp_trusted",
                            token_to_url=True)
    assert {r["auth"] for r in gh.requests} == {"Bearer ghp_trusted"}
    assert "withheld" not in out.status and out.matches


def test_a_task_passes_its_own_logger():
    seen: list[str] = []

    class Log:
        def info(self, fmt, *args):
            seen.append(fmt % args)

    with FakeGitHub() as gh:
        diagnose_text(LOG, "vllm", search=True, github_url=gh.url, log=Log())
    assert len(seen) == 1 and seen[0].startswith("github: searching issues of vllm-project/vllm")
