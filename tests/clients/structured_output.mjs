// The Vercel AI SDK's structured output against a gateway on the embedded
// default: generateObject and streamObject through its OpenAI provider
// (chat completions and the Responses API, each with a JSON schema) and
// its Anthropic provider (Messages). Every object must validate against
// the zod schema it was asked for; the SDK itself checks that and throws
// otherwise.
//   usage: node structured_output.mjs http://127.0.0.1:PORT
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, streamObject } from "ai";
import { z } from "zod";

const base = process.argv[2];
// The base URLs each provider takes (the README's table): both end in /v1.
const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: "unused" });
const anthropic = createAnthropic({ baseURL: `${base}/v1`, apiKey: "unused" });

const person = z.object({
  name: z.string(),
  age: z.number().int(),
  nicknames: z.array(z.string()),
  address: z.object({ city: z.string(), postcode: z.string().nullable() }),
  role: z.enum(["admin", "editor", "viewer"]),
});

const models = {
  "openai chat completions": openai.chat("auto"),
  "openai responses": openai.responses("auto"),
  "anthropic messages": anthropic("auto"),
};

let failed = 0;
for (const [name, model] of Object.entries(models)) {
  try {
    const ask = { model, schema: person, prompt: "Describe a user", maxRetries: 0, maxOutputTokens: 1024 };
    const { object } = await generateObject(ask);
    person.parse(object);
    const stream = streamObject(ask);
    // The stream is read only as it is consumed; its object settles after.
    let partials = 0;
    for await (const _ of stream.partialObjectStream) partials += 1;
    person.parse(await stream.object);
    if (partials < 2) throw new Error(`${name}: the object did not arrive in parts (${partials})`);
    console.log(`${name}: generateObject and streamObject gave ${JSON.stringify(object)}`);
  } catch (err) {
    failed += 1;
    console.error(`${name}: ${err?.stack ?? err}`);
  }
}
process.exit(failed ? 1 : 0);
