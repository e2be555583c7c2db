// The official `openai` npm client against `tachyon serve`: chat, a stream with
// usage, a tool call and its result, a streamed tool call (accumulated by the
// client's own stream helper). GATEWAY is the server's URL, ROUTE the model name.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: `${process.env.GATEWAY}/v1`, apiKey: "unused", maxRetries: 0 });
const model = process.env.ROUTE;
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];

const whole = await client.chat.completions.create({
  model,
  messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello?" }],
  max_tokens: 32,
});
assert.equal(whole.object, "chat.completion");
assert.ok(whole.choices[0].message.content.length > 0, "an answer");
assert.equal(whole.choices[0].finish_reason, "stop");
assert.ok(whole.usage.prompt_tokens > 0 && whole.usage.completion_tokens > 0);
assert.equal(typeof whole.usage.prompt_tokens_details?.cached_tokens, "number");

const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Hello?" }],
  stream: true,
  stream_options: { include_usage: true },
});
let text = "", usage = null, finish = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    text += choice.delta.content ?? "";
    finish = choice.finish_reason ?? finish;
  }
}
assert.equal(text, whole.choices[0].message.content, "streamed and whole say the same");
assert.equal(finish, "stop");
assert.ok(usage && usage.completion_tokens > 0, "the usage chunk");

const question = { role: "user", content: "What is the weather in Oslo?" };
const call = await client.chat.completions.create({ model, messages: [question], tools });
assert.equal(call.choices[0].finish_reason, "tool_calls");
const toolCall = call.choices[0].message.tool_calls[0];
assert.equal(toolCall.function.name, "get_weather");
assert.equal(JSON.parse(toolCall.function.arguments).city, "Oslo");
const answer = await client.chat.completions.create({
  model,
  tools,
  messages: [question, call.choices[0].message, { role: "tool", tool_call_id: toolCall.id, content: "5C, rain" }],
});
assert.equal(answer.choices[0].finish_reason, "stop");
assert.ok(answer.choices[0].message.content.length > 0);

const runner = client.chat.completions.stream({ model, messages: [question], tools });
const streamed = await runner.finalChatCompletion();
const streamedCall = streamed.choices[0].message.tool_calls[0];
assert.equal(streamedCall.id, toolCall.id);
assert.equal(streamedCall.function.name, "get_weather");
assert.deepEqual(JSON.parse(streamedCall.function.arguments), { city: "Oslo" });
assert.equal(streamed.choices[0].finish_reason, "tool_calls");

console.log(`openai client: route ${model}: chat, stream with usage, tool round trip, streamed tool call: ok`);
