"""Issue 46: SGLang and TensorRT-LLM answer errors with a flat ErrorResponse, vLLM with
OpenAI's nested object; the contract's error-shape check accepts both (the openai SDK reads
both) and says which it saw, and refuses a body with no message."""

from __future__ import annotations

import httpx

from infopt.contract.errors import _judge_error, error_message
from infopt.specs.contract import CheckStatus

NESTED = {"error": {"message": "bad", "type": "BadRequestError", "param": None, "code": 400}}
# sglang 0.5.23 entrypoints/openai/protocol.py ErrorResponse, as create_error_response sends it
FLAT = {"object": "error", "message": "bad", "type": "BadRequestError", "param": None,
        "code": 400}


def _resp(status: int, body) -> httpx.Response:
    return httpx.Response(status, json=body, request=httpx.Request("POST", "http://x/v1"))


def test_both_error_shapes_carry_a_message_and_other_bodies_do_not():
    assert error_message(NESTED) == error_message(FLAT) == "bad"
    assert error_message({"detail": "bad"}) is None  # FastAPI's default: no message
    assert error_message({"message": "bad"}) is None  # not an error object
    assert error_message(["bad"]) is None


def test_the_check_passes_either_shape_and_names_it():
    status, detail, _ = _judge_error(_resp(400, FLAT), "a bad request")
    assert status is CheckStatus.PASS and "flat error object" in detail
    status, detail, _ = _judge_error(_resp(400, NESTED), "a bad request")
    assert status is CheckStatus.PASS and "error.message" in detail
    status, detail, _ = _judge_error(_resp(400, {"detail": "x"}), "a bad request")
    assert status is CheckStatus.FAIL and "no error message" in detail
    assert _judge_error(_resp(200, FLAT), "a bad request")[0] is CheckStatus.FAIL
