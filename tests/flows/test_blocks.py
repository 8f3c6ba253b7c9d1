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
