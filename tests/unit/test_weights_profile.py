"""The weights a configuration serves, profiled as themselves (infopt.model.profile.
weights_profile): a downloaded checkpoint folder (an AWQ copy of Qwen3-8B, its config from
tests/fixtures/hub) is fitted with its own size and quantization, not the bf16 original's."""

from __future__ import annotations

import shutil

from infopt.model.profile import profile_model, weights_profile
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import FIXTURES

HUB = FIXTURES / "hub"
GIB = 2**30


def _checkpoint(folder, name: str, weights_bytes: int):
    folder.mkdir()
    shutil.copy(HUB / name / "config.json", folder / "config.json")
    with (folder / "model.safetensors").open("wb") as f:  # sparse: only its size is read
        f.truncate(weights_bytes)
    return folder


def test_a_downloaded_checkpoint_is_profiled_as_itself(tmp_path):
    original = profile_model(str(_checkpoint(tmp_path / "bf16", "Qwen__Qwen3-8B", 16 * GIB)))
    awq = _checkpoint(tmp_path / "awq", "Qwen__Qwen3-8B-AWQ", int(5.7 * GIB))
    got = weights_profile(original, str(awq))
    assert got.path == str(awq.resolve()) and got.file_bytes == int(5.7 * GIB)
    assert original.inspection.quantization is None  # bf16
    assert got.inspection.quantization.scheme == "W4A16"  # the folder's own AWQ config
    assert weights_profile(original, original.path) is original


def test_the_fit_of_a_checkpoint_folder_uses_its_own_weights(tmp_path):
    # infopt.tuning.plan_run.fit_of (the flow's and the winner's) is fit_config over it.
    from infopt.specs.serving import VllmConfig
    from infopt.tuning.candidates import fit_config

    hw = recorded_inventory("rtx4090_8x")  # 24 GiB each: bf16 Qwen3-8B does not fit on one
    original = profile_model(str(_checkpoint(tmp_path / "bf16", "Qwen__Qwen3-8B", 16 * GIB)))
    awq = _checkpoint(tmp_path / "awq", "Qwen__Qwen3-8B-AWQ", int(5.7 * GIB))
    config = VllmConfig(model_path=original.path, max_model_len=8192, max_num_seqs=4)
    on_original = fit_config(weights_profile(original, config.model_path), hw, config, 4)
    on_awq = fit_config(weights_profile(original, str(awq)), hw,
                        config.model_copy(update={"model_path": str(awq)}), 4)
    assert on_awq.weights_bytes_per_gpu < 7 * GIB < 15 * GIB < on_original.weights_bytes_per_gpu
