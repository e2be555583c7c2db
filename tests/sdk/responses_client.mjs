// The official `openai` npm client's Responses API against `tachyon serve`
// (/v1/responses): a whole response and its retrieval, a stream whose typed
// events come in order with consecutive sequence numbers, the client's stream
// helper, 400s for what is not served, a missing previous_response_id, delete.
// TOOLS=1: a forced function call continued with its function_call_output
// through previous_response_id, and the input items listed. SCHEMA=1: a
// json_schema text format, valid every time (grammar-constrained on a local
// engine, whatever its weights). RANDOM=1: a model of random weights, whose
// answers may stop at max_output_tokens (status incomplete).
// GATEWAY is the server's URL, ROUTE the model name.
import assert from "node:assert/strict";
import OpenAI from "openai";

const client = new OpenAI({ baseURL: `${process.env.GATEWAY}/v1`, apiKey: "unused", maxRetries: 0 });
const model = process.env.ROUTE;
const random = process.env.RANDOM === "1";
const finished = (r) => (random ? ["completed", "incomplete"] : ["completed"]).includes(r.status);

const whole = await client.responses.create({ model, instructions: "Be brief.", input: "Hello?", max_output_tokens: 32 });
assert.equal(whole.object, "response");
assert.match(whole.id, /^resp_/);
assert.ok(finished(whole), `status ${whole.status}`);
assert.equal(whole.output[0].type, "message");
assert.ok(whole.output_text.length > 0, "the client's output_text");
assert.ok(whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0);
assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + whole.usage.output_tokens);
assert.equal(whole.instructions, "Be brief.");
const again = await client.responses.retrieve(whole.id);
assert.deepEqual(again, whole, "retrieved as it was answered");

// A stream: every event in order, numbered from 0, the deltas adding up to the final text.
const stream = await client.responses.create({ model, input: "Hello?", max_output_tokens: 32, stream: true });
const types = [];
let deltas = "", final = null, seq = 0;
for await (const event of stream) {
  assert.equal(event.sequence_number, seq++);
  types.push(event.type);
  if (event.type === "response.output_text.delta") deltas += event.delta;
  if (["response.completed", "response.incomplete"].includes(event.type)) final = event.response;
}
assert.deepEqual(types.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added",
  "response.content_part.added"]);
assert.deepEqual(types.slice(-4, -1), ["response.output_text.done", "response.content_part.done",
  "response.output_item.done"]);
assert.ok(final && finished(final), "ends completed (or incomplete)");
assert.equal(deltas, final.output[0].content[0].text);
if (!random) assert.equal(final.output[0].content[0].text, whole.output_text, "streamed and whole say the same");

// The client's stream helper assembles the same.
const helper = client.responses.stream({ model, input: "Hello?", max_output_tokens: 32 });
const assembled = await helper.finalResponse();
assert.ok(finished(assembled));
assert.ok(assembled.output_text.length > 0);

// What is not served: a 400 that names it; a previous response that does not exist: 404.
await assert.rejects(client.responses.create({ model, input: "x", tools: [{ type: "web_search" }] }),
  (e) => e.status === 400 && /web_search/.test(e.message));
await assert.rejects(client.responses.create({ model, input: [{ type: "item_reference", id: "msg_1" }] }),
  (e) => e.status === 400 && /item_reference/.test(e.message));
await assert.rejects(client.responses.create({ model, input: "x", previous_response_id: "resp_nope" }),
  (e) => e.status === 404 && e.code === "previous_response_not_found");

if (process.env.TOOLS === "1") {
  const tools = [{
    type: "function", name: "get_weather", description: "The weather in a city", strict: true,
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  }];
  const call = await client.responses.create({
    model, tools, tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 64,
    input: [{ role: "user", content: "What is the weather in Oslo?" }],
  });
  const fc = call.output.find((item) => item.type === "function_call");
  assert.ok(fc, `a function_call item: ${JSON.stringify(call.output)}`);
  assert.equal(fc.name, "get_weather");
  assert.equal(typeof JSON.parse(fc.arguments).city, "string");
  const answer = await client.responses.create({
    model, tools, previous_response_id: call.id, max_output_tokens: 32,
    input: [{ type: "function_call_output", call_id: fc.call_id, output: "5C, rain" }],
  });
  assert.ok(finished(answer), `status ${answer.status}`);
  assert.equal(answer.previous_response_id, call.id);
  const items = await client.responses.inputItems.list(answer.id, { order: "asc" });
  const kinds = items.data.map((item) => item.type);
  assert.deepEqual(kinds, ["message", "function_call", "function_call_output"], JSON.stringify(items.data));
}

if (process.env.SCHEMA === "1") {
  const schema = {
    type: "object", additionalProperties: false, required: ["city", "celsius"],
    properties: { city: { type: "string" }, celsius: { type: "integer" } },
  };
  for (let i = 0; i < 3; ++i) {
    const r = await client.responses.create({
      model, input: `Weather report ${i}`, max_output_tokens: 200, temperature: 1,
      text: { format: { type: "json_schema", name: "report", schema, strict: true } },
    });
    const parsed = JSON.parse(r.output_text);
    assert.equal(typeof parsed.city, "string");
    assert.ok(Number.isInteger(parsed.celsius));
  }
}

await client.responses.delete(whole.id);
await assert.rejects(client.responses.retrieve(whole.id), (e) => e.status === 404);

console.log(`openai client: route ${model}: responses whole, retrieve, stream events, stream helper, 400s, 404` +
  `${process.env.TOOLS === "1" ? ", function call round trip" : ""}${process.env.SCHEMA === "1" ? ", json_schema" : ""}` +
  `, delete: ok`);
