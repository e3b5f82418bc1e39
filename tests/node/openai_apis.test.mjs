// The official `openai` client on the other OpenAI APIs: Responses (create, streaming, function tools,
// text.format and forced tool calls validated by ajv, a clear 400 for previous_response_id) and embeddings.create (base64 by default, float, dimensions),
// with the random qwen3's vectors checked against llama.cpp's (tests/fixtures/embeddings_llamacpp.json).
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { startServer, apiServers, isFake, isQwen3 } from "./server_process.mjs";
import { API_SCHEMAS, STRICT_TOOLS } from "./schemas.mjs";

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
// Random weights write noise: only the grammar can make their output valid, so only they prove it.
const NEEDS_NOISE = "needs the random-weight qwen3 (../shared): only there is valid output the grammar's doing";

// A response's output text, status and function calls, streamed or whole.
async function respond(client, params, stream) {
  if (!stream) {
    const r = await client.responses.create(params);
    return { text: r.output_text, status: r.status, calls: r.output.filter((i) => i.type === "function_call"), format: r.text.format };
  }
  let text = "", final = null;
  for await (const e of await client.responses.create({ ...params, stream: true })) {
    if (e.type === "response.output_text.delta") text += e.delta;
    if (e.type === "response.completed" || e.type === "response.incomplete") final = e.response;
  }
  return { text, status: final.status, calls: final.output.filter((i) => i.type === "function_call"), format: final.text.format };
}

const LOOKUP = {
  type: "function", name: "lookup", description: "Looks something up.",
  parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
};
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b));

for (const target of apiServers()) {
  describe(`openai client, responses + embeddings → ${target.name}`, () => {
    let server, client;
    before(async () => {
      server = startServer(target.command, target.args);
      client = new OpenAI({ baseURL: (await server.url) + "/v1", apiKey: "test-key", maxRetries: 0 });
    });
    after(() => server?.stop());

    test("models.list carries the context length and capabilities", async () => {
      const [m] = (await client.models.list()).data;
      assert.ok(m.context_length > 0 && m.max_model_len === m.context_length, JSON.stringify(m));
      assert.ok(m.capabilities.includes("chat") && m.capabilities.includes("completion"), JSON.stringify(m));
      if (isQwen3(target)) assert.ok(["tools", "thinking", "embeddings"].every((c) => m.capabilities.includes(c)), JSON.stringify(m));
      if (target.name.includes("stories260K")) assert.ok(!m.capabilities.includes("embeddings") && !m.capabilities.includes("tools"), JSON.stringify(m));
    });

    test("responses.create", async () => {
      const r = await client.responses.create({ model: "any", input: "Hello", instructions: "Be kind.", max_output_tokens: 20 });
      assert.match(r.id, /^resp_/);
      assert.equal(r.object, "response");
      assert.ok(["completed", "incomplete"].includes(r.status));
      assert.equal(typeof r.output_text, "string");
      assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
      assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
      if (isFake(target)) {
        assert.equal(r.output_text, "You said: **Hello**.");
        assert.equal(r.output.length, 1);
        assert.equal(r.output[0].type, "message");
      }
    });

    test("responses streaming", async () => {
      const stream = await client.responses.create({ model: "any", input: [{ role: "user", content: "Stream please" }], max_output_tokens: 40, stream: true });
      const types = [];
      let text = "", final = null;
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === "response.output_text.delta") text += e.delta;
        if (e.type === "response.completed" || e.type === "response.incomplete") final = e.response;
      }
      assert.equal(types[0], "response.created");
      assert.ok(final, `no response.completed in ${types.join(", ")}`);
      assert.equal(types.at(-1), final.status === "completed" ? "response.completed" : "response.incomplete");
      const sequence = types.filter((t) => t.startsWith("response.output_item."));
      assert.equal(sequence.filter((t) => t.endsWith("added")).length, sequence.filter((t) => t.endsWith("done")).length);
      const finalText = final.output.filter((i) => i.type === "message").flatMap((i) => i.content).map((c) => c.text).join("");
      assert.equal(finalText, text);
      if (isFake(target)) assert.equal(text, "You said: **Stream please**.");
    });

    test("function tools: a call, then its output", async () => {
      const first = await client.responses.create({ model: "any", input: "Find cats", tools: [LOOKUP], max_output_tokens: 120 });
      let call = first.output.find((i) => i.type === "function_call");
      if (isFake(target)) {
        assert.equal(call.name, "lookup");
        assert.deepEqual(JSON.parse(call.arguments), { query: "Find cats" });
      } else {
        call ??= { type: "function_call", call_id: "call_1", name: "lookup", arguments: '{"query":"cats"}' };
      }
      const second = await client.responses.create({
        model: "any", tools: [LOOKUP], max_output_tokens: 60,
        input: [{ role: "user", content: "Find cats" }, { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
                { type: "function_call_output", call_id: call.call_id, output: "3 cats" }],
      });
      assert.equal(second.object, "response");
      if (isFake(target)) assert.equal(second.output_text, "The tool said: 3 cats.");
    });

    test("function tools stream as function_call_arguments deltas", async () => {
      if (!isFake(target)) return;  // random weights call no tool
      const stream = await client.responses.create({ model: "any", input: "Find dogs", tools: [LOOKUP], tool_choice: "required", max_output_tokens: 120, stream: true });
      let args = "", done = null;
      for await (const e of stream) {
        if (e.type === "response.function_call_arguments.delta") args += e.delta;
        if (e.type === "response.output_item.done" && e.item.type === "function_call") done = e.item;
      }
      assert.deepEqual(JSON.parse(args), { query: "Find dogs" });
      assert.equal(done.name, "lookup");
    });

    test("text.format json_schema: every reply parses and validates, streamed and not", { skip: !isQwen3(target) && NEEDS_NOISE }, async () => {
      for (const { name, schema } of API_SCHEMAS) {
        const validate = ajv.compile(schema);
        for (const i of [1, 2])
          for (const stream of [false, true]) {
            const params = { model: "any", input: `Answer in JSON (${i}).`, temperature: 1.0, max_output_tokens: 200,
                             text: { format: { type: "json_schema", name, schema, strict: true } } };
            const r = await respond(client, params, stream);
            const where = `${name} #${i}${stream ? " streamed" : ""}: ${JSON.stringify(r.text)}`;
            assert.equal(r.status, "completed", where);
            assert.equal(r.format.type, "json_schema");
            let value;
            assert.doesNotThrow(() => (value = JSON.parse(r.text)), where);
            assert.ok(validate(value), `${where} ${ajv.errorsText(validate.errors)}`);
          }
      }
      const o = await respond(client, { model: "any", input: "JSON please", max_output_tokens: 300, text: { format: { type: "json_object" } } }, false);
      if (o.status === "completed") assert.equal(typeof JSON.parse(o.text), "object", o.text);
      else assert.ok(o.text.startsWith("{"), o.text);  // free strings may outrun the budget on noise
    });

    test("tool_choice required / named: calls always parse and match their parameters", { skip: !isQwen3(target) && NEEDS_NOISE }, async () => {
      const tools = STRICT_TOOLS.map((t) => ({ type: "function", name: t.name, parameters: t.parameters, strict: true }));
      const validators = Object.fromEntries(tools.map((t) => [t.name, ajv.compile(t.parameters)]));
      const cases = [
        { tool_choice: "required", names: ["get_weather", "add"] },
        { tool_choice: { type: "function", name: "get_weather" }, names: ["get_weather"] },
        { tool_choice: "required", parallel_tool_calls: false, names: ["get_weather", "add"], one: true },
      ];
      for (const c of cases)
        for (const stream of [false, true]) {
          const params = { model: "any", input: "Use a tool.", temperature: 1.0, tools, tool_choice: c.tool_choice, max_output_tokens: 300 };
          if (c.parallel_tool_calls === false) params.parallel_tool_calls = false;
          const r = await respond(client, params, stream);
          const where = `${JSON.stringify(c.tool_choice)}${stream ? " streamed" : ""}: ${JSON.stringify(r)}`;
          // Only with parallel calls off does the grammar end the turn after one call; otherwise random
          // weights may keep calling until max_output_tokens, and every call completed by then must still be valid.
          if (c.one) assert.equal(r.status, "completed", where);
          else assert.ok(["completed", "incomplete"].includes(r.status), where);
          assert.ok(r.calls.length >= 1, where);
          if (c.one) assert.equal(r.calls.length, 1, where);
          for (const call of r.calls) {
            assert.ok(c.names.includes(call.name), where);
            assert.ok(validators[call.name](JSON.parse(call.arguments)), where);
          }
        }
    });

    test("a bad text.format schema is a 400 naming the keyword", async () => {
      await assert.rejects(client.responses.create({ model: "any", input: "Hi", text: { format: { type: "json_schema", name: "x", schema: { type: "array", uniqueItems: true } } } }),
        (e) => e instanceof OpenAI.BadRequestError && /'uniqueItems'/.test(e.message));
    });

    test("previous_response_id is a clear 400", async () => {
      await assert.rejects(client.responses.create({ model: "any", input: "Hi", previous_response_id: "resp_123" }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `got ${e?.constructor?.name}`);
        assert.match(e.message, /previous_response_id/);
        return true;
      });
    });

    test("embeddings.create", async () => {
      if (target.name.includes("stories260K")) {  // no pooling declared, none given: a clear error
        await assert.rejects(client.embeddings.create({ model: "any", input: "Hi" }),
          (e) => e instanceof OpenAI.BadRequestError && /pooling/.test(e.message));
        return;
      }
      const r = await client.embeddings.create({ model: "any", input: ["Hello world", "The quick brown fox jumps over the lazy dog."] });  // base64 on the wire
      assert.equal(r.object, "list");
      assert.equal(r.data.length, 2);
      const [a, b] = r.data.map((d) => d.embedding);
      assert.equal(a.length, b.length);
      assert.ok(Math.abs(norm(a) - 1) < 1e-4 && Math.abs(norm(b) - 1) < 1e-4);
      assert.ok(r.usage.prompt_tokens > 0);
      const floats = await client.embeddings.create({ model: "any", input: "Hello world", encoding_format: "float" });
      assert.ok(cosine(floats.data[0].embedding, a) > 0.99999);
      const short = await client.embeddings.create({ model: "any", input: "Hello world", dimensions: 8, encoding_format: "float" });
      assert.equal(short.data[0].embedding.length, 8);
      assert.ok(Math.abs(norm(short.data[0].embedding) - 1) < 1e-4);
      if (isQwen3(target)) {  // the same vector llama.cpp computes for this model, through the HTTP API
        const fixture = JSON.parse(readFileSync(new URL("../fixtures/embeddings_llamacpp.json", import.meta.url)));
        const theirs = fixture.cases.find((c) => c.model === "random-qwen3-f32.gguf").inputs.find((i) => i.text === "Hello world");
        assert.ok(cosine(a, theirs.embedding) >= 0.999, `cosine ${cosine(a, theirs.embedding)}`);
      }
    });

    test("an embedding between two equal chats leaves the chat's cached prompt prefix", { skip: !isQwen3(target) && "needs a real model with pooling" }, async () => {
      const chat = () => client.chat.completions.create({ model: "any", max_tokens: 3, temperature: 0,
        messages: [{ role: "user", content: "Tell me a short story about a lighthouse keeper and the sea." }] });
      await chat();
      const repeat = await chat();  // what a plain repeat reuses
      assert.ok(repeat.timings.cache_n > 0, JSON.stringify(repeat.timings));
      await client.embeddings.create({ model: "any", input: ["A different text, longer than the chat's prompt so that it would cover every cached row of it, if it shared them.", "And a second one."] });
      const after = await chat();
      assert.equal(after.timings.cache_n, repeat.timings.cache_n);
      assert.equal(after.usage.prompt_tokens_details.cached_tokens, repeat.usage.prompt_tokens_details.cached_tokens);
      assert.equal(after.choices[0].message.content, repeat.choices[0].message.content);
    });
  });
}
