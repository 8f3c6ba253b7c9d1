import pytest

from blocks.credentials import InfoptCredentials

pytestmark = pytest.mark.integration


def test_credentials_block_round_trip_and_never_prints_secret(prefect_api, monkeypatch):
    InfoptCredentials(hf_token="hf_secret_123").save("test-creds", overwrite=True)
    loaded = InfoptCredentials.load("test-creds")
    assert loaded.hf_token_value() == "hf_secret_123"
    assert "hf_secret_123" not in repr(loaded) and "hf_secret_123" not in str(loaded.model_dump())
    monkeypatch.setenv("HF_TOKEN", "from_env")
    assert InfoptCredentials().hf_token_value() == "from_env"


def test_the_tasks_that_need_tokens_take_them_from_the_named_block(prefect_api, monkeypatch):
    """OptimizeRequest.credentials_block: the shortlist (hub API) and issue search (GitHub API)
    tasks resolve the block by name inside the task and send its tokens, not the
    environment's; the secret is never a task parameter."""
    from prefect import flow

    from infopt.engines.session import Troubleshooting, diagnose_start
    from infopt.hardware.host import inventory
    from tasks.target import shortlist_task
    from tests.fixture_data import FIXTURES
    from tests.githubserver import FakeGitHub
    from tests.hubserver import FakeHub

    monkeypatch.setenv("HF_TOKEN", "hf_unknown_to_the_hub")  # would be a 401
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_from_env")
    InfoptCredentials(hf_token="hf_fake_granted", github_token="ghp_from_block").save(
        "task-creds", overwrite=True)
    hw = inventory(measure_bandwidth=False)
    log = FIXTURES / "engine_logs" / "llamacpp_v_cache_quant_requires_flash_attn.log"

    @flow(name="tokens-test")
    def both(hub_url: str, gh_url: str):
        shortlist_task("HuggingFaceTB/SmolLM2-135M-Instruct", hw, hub_url,
                       credentials_block="task-creds")
        return diagnose_start(str(log), "llamacpp", Troubleshooting(
            search=True, github_url=gh_url, credentials_block="task-creds",
            token_to_url=True,  # the fake GitHub: trusted here
            token_source="blocks.credentials:github_token"))

    with FakeHub() as hub, FakeGitHub(token="ghp_from_block") as gh:
        diag = both(hub.endpoint, gh.url)
    # (Redirects to the CDN origin carry no token, as huggingface_hub does with the real hub.)
    assert {r["authorization"] for r in hub.requests} - {None} == {"Bearer hf_fake_granted"}
    assert gh.requests and {r["auth"] for r in gh.requests} == {"Bearer ghp_from_block"}
    assert "offline" not in diag.search and "401" not in diag.search
