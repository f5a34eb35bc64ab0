"""Structured outputs on the bundled SmolLM2: 100 generated JSON schemas at temperature 0 and 1, every output
parses and validates with `jsonschema` (chapter 17, issue 25)."""
import json
import random

import jsonschema
import pytest

from mini_infer import LLM, SamplingParams
from mini_infer.engine.sampling import StructuredOutputs

NUM_SCHEMAS = 100
MAX_TOKENS = 160


def leaf(rng: random.Random) -> dict:
    "A small scalar schema: a bounded integer or number, a short string, a boolean or an enum."
    kind = rng.choice(["integer", "number", "string", "boolean", "enum"])
    if kind == "integer":
        lo = rng.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 100)}
    if kind == "number":
        lo = rng.randint(-10, 10)
        return {"type": "number", "minimum": lo, "maximum": lo + rng.randint(1, 20)}
    if kind == "string":
        return {"type": "string", "minLength": rng.randint(0, 2), "maxLength": rng.randint(3, 8)}
    if kind == "boolean":
        return {"type": "boolean"}
    return {"enum": rng.sample(["red", "green", "blue", "cat", "dog", 1, 2, True, None], rng.randint(2, 4))}


def node(rng: random.Random, depth: int) -> dict:
    "A leaf, a short array, or (while depth lasts) a nested object."
    r = rng.random()
    if depth > 0 and r < 0.3:
        return obj(rng, depth - 1)
    if r < 0.5:
        return {"type": "array", "items": leaf(rng), "minItems": rng.randint(0, 1), "maxItems": rng.randint(1, 3)}
    return leaf(rng)


def obj(rng: random.Random, depth: int) -> dict:
    "An object of 1 to 3 fields, some required, no extra properties."
    names = rng.sample(["id", "name", "size", "tags", "kind", "meta", "ok", "score"], rng.randint(1, 3))
    props = {n: node(rng, depth) for n in names}
    required = [n for n in names if rng.random() < 0.7] or names[:1]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def schemas(seed: int = 25) -> list[dict]:
    rng = random.Random(seed)
    return [obj(rng, depth=2) for _ in range(NUM_SCHEMAS)]


@pytest.fixture(scope="module")
def llm():
    return LLM()


def test_generator_is_valid_and_varied():
    all_ = schemas()
    for s in all_:
        jsonschema.Draft202012Validator.check_schema(s)
    text = json.dumps(all_)
    assert len({json.dumps(s) for s in all_}) >= NUM_SCHEMAS - 5      # nearly all distinct
    for word in ('"enum"', '"minimum"', '"array"', '"required"', '"properties": {"'):
        assert word in text
    assert any(isinstance(p, dict) and p.get("type") == "object" for s in all_ for p in s["properties"].values())


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_100_schemas_validate(llm, temperature):
    params = [SamplingParams(temperature=temperature, seed=i if temperature else None, max_tokens=MAX_TOKENS,
                             structured_outputs=StructuredOutputs(json=s, disable_any_whitespace=True))
              for i, s in enumerate(schemas())]
    prompts = [[{"role": "user", "content": "Reply with a JSON object."}]] * NUM_SCHEMAS
    outs = llm.chat(prompts, params)
    for i, (schema, out) in enumerate(zip(schemas(), outs)):
        o = out.outputs[0]
        assert o.finish_reason == "stop", f"schema {i} at T={temperature}: {o.finish_reason} after {len(o.token_ids)} tokens: {o.text!r}"
        jsonschema.validate(json.loads(o.text), schema)


def test_uncompilable_schema_is_a_value_error(llm):
    with pytest.raises(ValueError, match="structured_outputs.json"):
        llm.generate("x", SamplingParams(structured_outputs=StructuredOutputs(json={"type": "object", "required": 5})))
