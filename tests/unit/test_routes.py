"""Route drivers: request bodies and the parsing of each route's answers. The event payloads are
copied from a real llama-server (llama-cpp-python 0.3.36's llama.cpp) and from vLLM's
documented continuous-usage chunks; the integration tests drive the same routes live."""

from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.mlx import adapter as mlx
from infopt.engines.sglang import adapter as sglang
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.vllm import adapter as vllm
from infopt.loadgen.routes import DRIVERS, request_body
from infopt.specs.traffic import RouteName

CHAT, COMPL, RESP, ANTH = (DRIVERS[r] for r in (RouteName.CHAT_COMPLETIONS,
                                                 RouteName.COMPLETIONS, RouteName.RESPONSES,
                                                 RouteName.ANTHROPIC_MESSAGES))
FORCED = {"max_tokens": 9, "min_tokens": 9, "ignore_eos": True}


def test_bodies_carry_the_forced_length_in_each_routes_own_field():
    chat = request_body(CHAT, "m", "hi", FORCED, True, {"timings_per_token": True})
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and chat["max_tokens"] == 9
    assert chat["stream_options"] == {"include_usage": True} and chat["timings_per_token"]
    compl = request_body(COMPL, "m", "hi", FORCED, True,
                         {"stream_options": {"continuous_usage_stats": True}})
    assert compl["prompt"] == "hi" and compl["stream_options"] == {
        "include_usage": True, "continuous_usage_stats": True}
    resp = request_body(RESP, "m", "hi", FORCED, True, {})
    assert resp["input"] == "hi" and resp["max_output_tokens"] == 9 and "max_tokens" not in resp
    assert "stream_options" not in resp  # not a Responses API field
    anth = request_body(ANTH, "m", "hi", FORCED, False, {"timings_per_token": True})
    assert anth["max_tokens"] == 9 and anth["stream"] is False
    assert "timings_per_token" not in anth  # counting fields only on streamed requests


def test_openai_chunks_usage_and_each_engines_running_count():
    llama = {"choices": [{"index": 0, "delta": {"content": "'m"}}],
             "timings": {"cache_n": 41, "prompt_n": 1, "predicted_n": 2}}
    assert CHAT.parse_event("", llama).text == "'m"
    assert llamacpp.ADAPTER.stream_counting.read(llama) == 2
    assert vllm.ADAPTER.stream_counting.read(llama) is None  # another engine's field
    chunk = {"choices": [{"index": 0, "delta": {"content": "ab"}}],
             "usage": {"prompt_tokens": 42, "completion_tokens": 5, "total_tokens": 47}}
    c = CHAT.parse_event("", chunk)
    assert (c.text, c.prompt_tokens) == ("ab", 42)
    assert vllm.ADAPTER.stream_counting.read(chunk) == 5
    for engine in (sglang, trtllm):  # the same vLLM extension
        assert engine.ADAPTER.stream_counting == vllm.ADAPTER.stream_counting
    assert mlx.ADAPTER.stream_counting is None
    final = {"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 42,
                                      "prompt_tokens_details": {"cached_tokens": 41}}}
    c = CHAT.parse_event("", final)
    assert (c.text, c.output_tokens, c.cached_tokens) == ("", 3, 41)
    # llama.cpp's final event adds its timings: the request's drafted and accepted tokens.
    final["timings"] = {"predicted_n": 3, "draft_n": 53, "draft_n_accepted": 49}
    c = CHAT.parse_event("", final)
    assert (c.draft_tokens, c.draft_accepted) == (53, 49)
    mid = {"choices": [{"delta": {"content": " a"}}], "timings": final["timings"]}
    assert CHAT.parse_event("", mid).draft_tokens is None  # read with the usage block only
    assert CHAT.parse_body({**final, "choices": [{"message": {"content": "a"}}]}
                           ).draft_tokens == 53
    final["timings"] = {"predicted_n": 3}  # no drafting: nothing reported, not zero
    assert CHAT.parse_event("", final).draft_tokens is None
    role_only = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}
    assert CHAT.parse_event("", role_only).text == ""
    assert COMPL.parse_event("", {"choices": [{"text": " x"}]}).text == " x"


def test_anthropic_events_prompt_is_input_plus_cache_reads():
    start = {"type": "message_start", "message": {"usage": {
        "cache_read_input_tokens": 41, "input_tokens": 1, "output_tokens": 0}}}
    c = ANTH.parse_event("message_start", start)
    assert (c.prompt_tokens, c.cached_tokens) == (42, 41)
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": " sorry"}}
    assert ANTH.parse_event("content_block_delta", delta).text == " sorry"
    end = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
           "usage": {"output_tokens": 3}}
    c = ANTH.parse_event("message_delta", end)
    assert (c.output_tokens, c.prompt_tokens) == (3, None)
    assert ANTH.parse_event("message_stop", {"type": "message_stop"}).done
    body = {"content": [{"type": "text", "text": "1. The"}], "usage": {
        "cache_read_input_tokens": 41, "input_tokens": 1, "output_tokens": 3}}
    c = ANTH.parse_body(body)
    assert (c.text, c.prompt_tokens, c.output_tokens, c.done) == ("1. The", 42, 3, True)


def test_responses_events_and_body():
    assert RESP.parse_event("response.output_text.delta", {
        "type": "response.output_text.delta", "delta": "Hi"}).text == "Hi"
    done = {"type": "response.completed", "response": {"usage": {
        "input_tokens": 60, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 24}}}}
    c = RESP.parse_event("response.completed", done)
    assert (c.prompt_tokens, c.output_tokens, c.cached_tokens, c.done) == (60, 9, 24, True)
    body = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "a b"}]}],
            "usage": {"input_tokens": 60, "output_tokens": 9}}
    assert RESP.parse_body(body).text == "a b"
