"""The importance matrix's runner and where its variants are kept: the matrix file appears
only when llama-imatrix completed (a crash or a refusal leaves nothing, and says why in one
line), its sample file is removed, the command is the tool's own flags; a variant made with a
matrix is a file of its own, named by the sample, and the request's sample is what is
digested. Run with stand-in binaries (shell scripts): the real tool is in
tests/integration/test_imatrix_llamacpp.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.engines.calibration_texts import calibration_sample, default_texts
from infopt.engines.quantize import importance_matrix, requantize
from infopt.specs.base import InfoptError


def _tool(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "tool"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    return tool


def test_the_matrix_appears_only_when_the_tool_completed(tmp_path):
    args = tmp_path / "args"
    # Writes its -o argument, as the tool does, after recording its argv.
    ok = _tool(tmp_path / "ok", f'echo "$@" > "{args}"\n'
                                'while [ $# -gt 0 ]; do [ "$1" = -o ] && echo m > "$2"; '
                                'shift; done\n')
    out = importance_matrix(ok, tmp_path / "m.gguf", default_texts(8), tmp_path / "im.gguf")
    assert out.read_text() == "m\n"
    argv = args.read_text().split()
    assert argv[:2] == ["-m", str(tmp_path / "m.gguf")] and "--no-ppl" in argv
    assert argv[argv.index("-c") + 1] == "512"
    assert not list(tmp_path.glob("*.sample.txt")) and not list(tmp_path.glob("*partial*"))

    failing = _tool(tmp_path / "f", 'echo "main: you need at least 1024 tokens for a context '
                                    'of 512 tokens" >&2\nexit 1\n')
    with pytest.raises(InfoptError, match="you need at least 1024 tokens") as err:
        importance_matrix(failing, tmp_path / "m.gguf", ["short"], tmp_path / "im2.gguf")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "im2.gguf").exists() and not list(tmp_path.glob("im2*"))
    with pytest.raises(InfoptError, match="calibration sample"):
        importance_matrix(ok, tmp_path / "m.gguf", [], tmp_path / "im3.gguf")


def test_requantize_passes_the_matrix_before_its_positional_arguments(tmp_path):
    args = tmp_path / "args"
    tool = _tool(tmp_path / "q", f'echo "$@" > "{args}"\n'
                                 'for a; do last3="$prev2 $prev1 $a"; prev2=$prev1; prev1=$a; '
                                 'done\nset -- $last3\necho q > "$1"\n')
    out = requantize(tool, tmp_path / "src.gguf", tmp_path / "Q2_K.gguf", "Q2_K",
                     imatrix=tmp_path / "im.gguf")
    assert out.is_file()
    assert args.read_text().split() == [
        "--allow-requantize", "--imatrix", str(tmp_path / "im.gguf"), str(tmp_path / "src.gguf"),
        str(tmp_path / "Q2_K.gguf.partial"), "Q2_K", "2"]


def test_a_variant_with_a_matrix_is_kept_apart_and_named_by_its_sample(tmp_path, monkeypatch):
    from tasks.weights import imatrix_path, variant_path

    monkeypatch.setenv("INFOPT_CACHE_DIR", str(tmp_path))
    plain = variant_path("d" * 64, "0.3.36", "Q2_K")
    sample = calibration_sample(None, 64)
    weighted = variant_path("d" * 64, "0.3.36", "Q2_K", sample.digest)
    assert plain != weighted and weighted.name.endswith(f"-Q2_K-imatrix{sample.digest}.gguf")
    assert imatrix_path("d" * 64, "0.3.36", sample.digest).parent == plain.parent
    assert calibration_sample(None, 32).digest != sample.digest  # the sample's size counts
    assert sample.what.endswith(", 64 samples") and len(sample.texts) == 64
