"""Structured outputs through the OpenAI-compatible server: `response_format` on both routes, streamed and not,
driven by the official `openai` client; an uncompilable schema is a 400 and the server goes on (issue 25)."""
import json

import jsonschema
import openai
import pytest

from conftest import API_KEY

MODEL = "SmolLM2-135M-Instruct"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                           "population": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["city", "population"], "additionalProperties": False}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}
CHAT = [{"role": "user", "content": "Name a city in France as JSON."}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=120)


def test_chat_json_schema_plain_and_streamed(client):
    r = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=60, temperature=0,
                                       response_format=JSON_SCHEMA)
    text = r.choices[0].message.content
    jsonschema.validate(json.loads(text), SCHEMA)
    assert r.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=60, temperature=0,
                                                 response_format=JSON_SCHEMA, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text and chunks[-1].choices[0].finish_reason == "stop"


def test_completion_json_object_and_schema(client):
    r = client.completions.create(model=MODEL, prompt="A JSON object describing a dog:", max_tokens=80,
                                  temperature=0, extra_body={"response_format": {"type": "json_object"}})
    assert isinstance(json.loads(r.choices[0].text), dict)
    chunks = list(client.completions.create(model=MODEL, prompt="Paris as JSON:", max_tokens=60, temperature=1.0,
                                            seed=1, n=2, stream=True, extra_body={"response_format": JSON_SCHEMA}))
    for i in range(2):
        text = "".join(c.choices[0].text for c in chunks if c.choices and c.choices[0].index == i)
        jsonschema.validate(json.loads(text), SCHEMA)


def test_vllm_extras(client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Is water wet?"}],
                                       max_tokens=5, temperature=0, extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].message.content in ("yes", "no")


def test_bad_schema_is_400_and_server_goes_on(client):
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "bogus"}}}
    for route in ("chat", "completion"):
        with pytest.raises(openai.BadRequestError) as e:
            if route == "chat":
                client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8, response_format=bad)
            else:
                client.completions.create(model=MODEL, prompt="x", max_tokens=8, extra_body={"response_format": bad})
        body = e.value.body
        assert "bogus" in body["message"] and body["param"] == "response_format", body
    with pytest.raises(openai.BadRequestError, match="response_format.type"):
        client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8, response_format={"type": "xml"})
    r = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=4, temperature=0)
    assert r.choices[0].message.content


def test_grammar_the_vocabulary_cannot_finish_is_400(client):
    """The fuzzer's find (schemathesis seed 2): SmolLM2 has no token holding byte 0x1d, so a choice with it cannot
    be spelled. Refused at admission when the choice list says so, and as a 400 (not a 500 'logits not finite')
    when a regex or `min_tokens` leaves the mask empty mid-generation; the server goes on."""
    with pytest.raises(openai.BadRequestError, match="0x1d") as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=4, extra_body={"guided_choice": ["\x1d"]})
    assert e.value.body["param"] == "response_format", e.value.body
    with pytest.raises(openai.BadRequestError, match="cannot be completed"):
        client.completions.create(model=MODEL, prompt="x", max_tokens=4, extra_body={"guided_regex": "a\x1d"})
    with pytest.raises(openai.BadRequestError, match="min_tokens"):
        client.completions.create(model=MODEL, prompt="x", max_tokens=8,
                                  extra_body={"guided_choice": ["yes"], "min_tokens": 5})
    r = client.completions.create(model=MODEL, prompt="x", max_tokens=4, extra_body={"guided_choice": ["yes", "no"]})
    assert r.choices[0].text in ("yes", "no")
