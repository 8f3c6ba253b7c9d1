"""Issue 46: each adapter names the releases whose own code judged its commands, and a run on
another release says so in its report."""

from __future__ import annotations

from infopt.engines import ENGINES, adapter_for
from infopt.engines.base import CheckedVersions, unchecked_version_note


def test_the_release_prefix_matches_patch_releases_only():
    c = CheckedVersions(("0.32", "0.33"), "parsed")
    assert unchecked_version_note(c, "vLLM", "0.32.0") is None
    assert unchecked_version_note(c, "vLLM", "0.33.1+cpu") is None
    assert unchecked_version_note(c, "vLLM", "v0.33.0") is None
    note = unchecked_version_note(c, "vLLM", "0.34.0")
    assert note is not None and "0.34.0 is installed" in note and "0.32, 0.33" in note
    assert unchecked_version_note(c, "vLLM", "0.320.0") is not None  # not a prefix of 0.32.x
    assert unchecked_version_note(None, "vLLM", "9.9") is None


def test_every_gpu_engine_names_what_its_commands_were_checked_against():
    for name in ("vllm", "sglang", "trtllm", "llamacpp"):
        a = adapter_for(name)
        assert a.checked_versions is not None and a.checked_versions.versions, name
        assert a.checked_versions.how, name
    assert set(ENGINES)  # the registry is loaded


def test_the_report_says_when_the_installed_release_was_not_checked():
    from infopt.report.markdown import _version_note

    class R:
        engine, engine_version = "vllm", "0.35.0"
    assert "0.35.0 is installed" in (_version_note(R()) or "")  # type: ignore[arg-type]
    R.engine_version = "0.32.0"
    assert _version_note(R()) is None  # type: ignore[arg-type]
