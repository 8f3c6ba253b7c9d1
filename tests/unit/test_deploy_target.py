"""Issue 46, item 7: a request's `deploy` section names where the rendered deployment's pods get
the measured weights and a hub token; the hub is used only at the measured commit after an
approved download, and a bad name is refused where the request is read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infopt.specs.deploy import DeployTarget, HubDownload, ModelClaim, ModelHostPath
from infopt.specs.request import OptimizeRequest

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_a_named_volume_wins_and_the_hub_needs_an_approved_download_at_a_commit():
    assert DeployTarget(model_claim="weights").source("org/m", COMMIT, True) == \
        ModelClaim(claim_name="weights")
    assert DeployTarget(model_host_path="/srv/models").source(None, None, False) == \
        ModelHostPath(path="/srv/models")
    assert DeployTarget().source("org/m", COMMIT, True) == HubDownload(hub_id="org/m",
                                                                       revision=COMMIT)
    assert DeployTarget().source("org/m", COMMIT, False) is None  # nothing was approved
    assert DeployTarget().source("org/m", "main", True) is None  # a branch can move
    assert DeployTarget().token() is None
    assert DeployTarget(hf_token_secret="hf-token").token().secret_name == "hf-token"


def test_bad_deploy_names_are_refused_when_the_request_is_read():
    with pytest.raises(ValidationError, match="either model_claim or model_host_path"):
        OptimizeRequest.model_validate({"deploy": {"model_claim": "w",
                                                   "model_host_path": "/srv"}})
    with pytest.raises(ValidationError):
        OptimizeRequest.model_validate({"deploy": {"model_claim": "Not_A_Name"}})
    with pytest.raises(ValidationError):
        OptimizeRequest.model_validate({"deploy": {"model_host_path": "relative/dir"}})
    assert OptimizeRequest().deploy == DeployTarget()
