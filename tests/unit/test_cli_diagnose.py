"""`infopt diagnose --engine` names a known engine or is refused (exit 2, one paragraph)."""

from typer.testing import CliRunner

from infopt.cli import app
from tests.fixture_data import FIXTURES

LOG = FIXTURES / "engine_logs" / "llamacpp_v_cache_quant_requires_flash_attn.log"


def test_an_unknown_engine_is_refused_and_a_known_one_diagnosed():
    bad = CliRunner().invoke(app, ["diagnose", str(LOG), "--engine", "ollama", "--no-search"])
    assert bad.exit_code == 2 and "--engine 'ollama' is not an engine" in bad.output
    assert "llamacpp" in bad.output and "Traceback" not in bad.output
    ok = CliRunner().invoke(app, ["diagnose", str(LOG), "--engine", "llamacpp", "--no-search"])
    assert ok.exit_code == 0 and "quantized V cache" in ok.output
