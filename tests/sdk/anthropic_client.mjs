// The official `@anthropic-ai/sdk` client against `tachyon serve`'s /v1/messages:
// messages.create, messages.stream().finalMessage(), a tool call and its result,
// and an error in Anthropic's shape. GATEWAY is the server's URL, ROUTE the model.
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ baseURL: process.env.GATEWAY, apiKey: "unused", maxRetries: 0 });
const model = process.env.ROUTE;
const tools = [{
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}];

const whole = await client.messages.create({
  model,
  max_tokens: 64,
  system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
  messages: [{ role: "user", content: "Hello?" }],
});
assert.equal(whole.type, "message");
assert.equal(whole.role, "assistant");
assert.equal(whole.content[0].type, "text");
assert.ok(whole.content[0].text.length > 0);
assert.equal(whole.stop_reason, "end_turn");
assert.ok(whole.usage.output_tokens > 0);

const stream = client.messages.stream({ model, max_tokens: 64, messages: [{ role: "user", content: "Hello?" }] });
let text = "";
stream.on("text", (delta) => { text += delta; });
const final = await stream.finalMessage();
assert.equal(final.content[0].text, whole.content[0].text, "streamed and whole say the same");
assert.equal(text, final.content[0].text);
assert.equal(final.stop_reason, "end_turn");
assert.ok(final.usage.output_tokens > 0);

const question = { role: "user", content: "What is the weather in Oslo?" };
if (process.env.TOOLS === "1") {
  const call = await client.messages.create({ model, max_tokens: 64, tools, messages: [question] });
  assert.equal(call.stop_reason, "tool_use");
  const use = call.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, { city: "Oslo" });
  const answer = await client.messages.create({
    model, max_tokens: 64, tools,
    messages: [question, { role: "assistant", content: call.content },
               { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "5C, rain" }] }],
  });
  assert.equal(answer.stop_reason, "end_turn");
  const streamed = await client.messages.stream({ model, max_tokens: 64, tools, messages: [question] }).finalMessage();
  assert.deepEqual(streamed.content.find((b) => b.type === "tool_use").input, { city: "Oslo" });
}

await assert.rejects(
  client.messages.create({ model, max_tokens: 0, messages: [question] }),
  (e) => e instanceof Anthropic.BadRequestError && e.error?.type === "error" &&
         e.error.error.type === "invalid_request_error");

console.log(`anthropic client: route ${model}: create, stream().finalMessage(), ${process.env.TOOLS === "1" ? "tool round trip, " : ""}errors: ok`);
