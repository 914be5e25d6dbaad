"""Structured output through pydantic-ai against a gateway on the embedded
default, as a new user runs it: NativeOutput (the model's JSON-schema
response format) over chat completions and over the Responses API, and
pydantic-ai's default tool output. pydantic-ai validates every answer
against the model class and raises when it does not fit."""

from typing import Literal

import pydantic
import pytest
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from conftest import Proc


class Address(pydantic.BaseModel):
    city: str
    postcode: str | None


class Person(pydantic.BaseModel):
    name: str
    age: int
    nicknames: list[str]
    address: Address
    role: Literal["admin", "editor", "viewer"]


@pytest.fixture(scope="module")
def embedded_default():
    gateway = Proc(["serve", "--listen", "127.0.0.1:0"])
    yield gateway
    gateway.stop()


@pytest.mark.parametrize("api", [OpenAIChatModel, OpenAIResponsesModel])
@pytest.mark.parametrize("output", [NativeOutput(Person), Person], ids=["native", "tool"])
def test_pydantic_ai_structured_output(embedded_default, api, output):
    provider = OpenAIProvider(base_url=embedded_default.url + "/v1", api_key="unused")
    agent = Agent(api("auto", provider=provider), output_type=output)
    person = agent.run_sync("Describe a user").output
    assert isinstance(person, Person)
