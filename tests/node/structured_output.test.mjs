// Structured output through the official openai client against `tinyllm serve` on a random-weight
// model (its logits are noise: only the grammar makes the output valid). JSON schemas are checked
// with ajv (+ ajv-formats), GBNF grammars with an independent recognizer (gbnf_check.mjs), tool
// calls against their functions' parameter schemas.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import OpenAI from "openai";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { startServer } from "./server_process.mjs";
import { SCHEMAS, GRAMMARS } from "./schemas.mjs";
import { parseGbnf, gbnfAccepts } from "./gbnf_check.mjs";

const MODEL = `${process.env.TINYLLM_SHARED ?? "../../../shared"}/models/random-qwen2-q8_0.gguf`;
const SEEDS = [1, 2, 3, 4, 5];
const MAX_TOKENS = 200;
const required = process.env.TINYLLM_REQUIRE_SHARED && process.env.TINYLLM_REQUIRE_SHARED !== "0";
const have = existsSync(MODEL);
if (!have && required) throw new Error(`${MODEL} is required (TINYLLM_REQUIRE_SHARED) but absent`);
if (!have) console.log(`SKIPPED: reference data ../shared is absent (${MODEL})`);

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// The reply's content and finish reason, streamed or whole.
async function reply(client, params, stream) {
  if (!stream) {
    const r = await client.chat.completions.create(params);
    return { content: r.choices[0].message.content ?? "", tool_calls: r.choices[0].message.tool_calls ?? [], finish: r.choices[0].finish_reason };
  }
  const s = await client.chat.completions.create({ ...params, stream: true });
  let content = "", finish = null;
  const calls = [];
  for await (const chunk of s) {
    const c = chunk.choices[0];
    if (!c) continue;
    content += c.delta?.content ?? "";
    for (const d of c.delta?.tool_calls ?? []) {
      calls[d.index] ??= { function: { name: "", arguments: "" } };
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    finish = c.finish_reason ?? finish;
  }
  return { content, tool_calls: calls, finish };
}

const base = (seed) => ({ model: "random", messages: [{ role: "user", content: "Answer in JSON." }], seed, temperature: 1.0, max_tokens: MAX_TOKENS });

describe("structured output → tinyllm serve (random-qwen2)", { skip: !have }, () => {
  let server, client;
  before(async () => {
    server = startServer(process.env.TINYLLM_BIN, ["serve", "--model", MODEL, "--port", "0", "--max-context", "512"]);
    client = new OpenAI({ baseURL: `${await server.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(() => server?.stop());

  test(`${SCHEMAS.length} JSON schemas × ${SEEDS.length} seeds, streamed and not, all validate`, async () => {
    assert.ok(SCHEMAS.length >= 40);
    for (const { name, schema } of SCHEMAS) {
      const validate = ajv.compile(schema);
      for (const seed of SEEDS)
        for (const stream of [false, true]) {
          const params = { ...base(seed), response_format: { type: "json_schema", json_schema: { name, schema, strict: true } } };
          const r = await reply(client, params, stream);
          const where = `${name} seed ${seed}${stream ? " streamed" : ""}: ${JSON.stringify(r.content)}`;
          assert.equal(r.finish, "stop", where);
          let value;
          assert.doesNotThrow(() => (value = JSON.parse(r.content)), where);
          assert.ok(validate(value), `${where} ${ajv.errorsText(validate.errors)}`);
        }
    }
  });

  test("json_object and llama-server's json_schema field on /v1/completions", async () => {
    const schema = SCHEMAS.find((s) => s.name === "record-list").schema;
    const validate = ajv.compile(schema);
    for (const seed of SEEDS) {
      const r = await client.completions.create({ model: "random", prompt: "JSON:", seed, temperature: 1.0, max_tokens: MAX_TOKENS, json_schema: schema });
      assert.equal(r.choices[0].finish_reason, "stop");
      assert.ok(validate(JSON.parse(r.choices[0].text)), r.choices[0].text);
      const o = await reply(client, { ...base(seed), response_format: { type: "json_object" }, max_tokens: 300 }, seed % 2 === 0);
      if (o.finish === "stop") assert.equal(typeof JSON.parse(o.content), "object", o.content);
      else assert.ok(o.content.startsWith("{"), o.content);  // free strings may outrun max_tokens on noise
    }
  });

  test(`${GRAMMARS.length} GBNF grammars × ${SEEDS.length} seeds, checked by an independent recognizer`, async () => {
    assert.ok(GRAMMARS.length >= 20);
    for (const g of GRAMMARS) {
      const rules = parseGbnf(g.gbnf);
      for (const s of g.good) assert.ok(gbnfAccepts(rules, s), `checker: ${g.name} accepts ${s}`);
      assert.ok(!gbnfAccepts(rules, g.bad), `checker: ${g.name} rejects ${g.bad}`);
      for (const seed of SEEDS) {
        const r = await reply(client, { ...base(seed), grammar: g.gbnf }, seed % 2 === 1);
        assert.equal(r.finish, "stop", `${g.name} seed ${seed}: ${JSON.stringify(r.content)}`);
        assert.ok(gbnfAccepts(rules, r.content), `${g.name} seed ${seed}: ${JSON.stringify(r.content)}`);
      }
    }
  });

  const TOOLS = [
    { type: "function", function: { name: "get_weather", description: "Weather in a city", parameters: { type: "object", properties: { city: { type: "string", maxLength: 8 }, unit: { enum: ["C", "F"] } }, required: ["city", "unit"], additionalProperties: false } } },
    { type: "function", function: { name: "add", description: "Adds two numbers", parameters: { type: "object", properties: { a: { type: "integer", minimum: 0, maximum: 999 }, b: { type: "integer" } }, required: ["a", "b"], additionalProperties: false } } },
  ];
  const toolValidators = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

  test("tool_choice required / named / parallel_tool_calls:false: calls always parse and match their schema", async () => {
    const cases = [
      { tool_choice: "required", names: ["get_weather", "add"] },
      { tool_choice: { type: "function", function: { name: "add" } }, names: ["add"] },
      { tool_choice: "required", parallel_tool_calls: false, names: ["get_weather", "add"], one: true },
    ];
    for (const c of cases)
      for (const seed of SEEDS)
        for (const stream of [false, true]) {
          const params = { ...base(seed), tools: TOOLS, tool_choice: c.tool_choice, max_tokens: 300 };
          if (c.parallel_tool_calls === false) params.parallel_tool_calls = false;
          const r = await reply(client, params, stream);
          const where = `${JSON.stringify(c.tool_choice)} seed ${seed}${stream ? " streamed" : ""}: ${JSON.stringify(r)}`;
          assert.equal(r.finish, "tool_calls", where);
          assert.ok(r.tool_calls.length >= 1, where);
          if (c.one) assert.equal(r.tool_calls.length, 1, where);
          for (const call of r.tool_calls) {
            assert.ok(c.names.includes(call.function.name), where);
            assert.ok(toolValidators[call.function.name](JSON.parse(call.function.arguments)), where);
          }
        }
  });

  test("a Qwen3-Coder template (--chat-template) gets calls in its XML syntax, parsed and matching the schema", async () => {
    const template = `${process.env.TINYLLM_SHARED ?? "../../../shared"}/golden/templates/templates/Qwen3-Coder.jinja`;
    const coder = startServer(process.env.TINYLLM_BIN, ["serve", "--model", MODEL, "--port", "0", "--max-context", "2048", "--chat-template", template]);
    try {
      const c = new OpenAI({ baseURL: `${await coder.url}/v1`, apiKey: "none", maxRetries: 0 });
      for (const seed of SEEDS)
        for (const stream of [false, true]) {
          const r = await reply(c, { ...base(seed), tools: TOOLS, tool_choice: "required", parallel_tool_calls: false, max_tokens: 300 }, stream);
          const where = `seed ${seed}${stream ? " streamed" : ""}: ${JSON.stringify(r)}`;
          assert.equal(r.finish, "tool_calls", where);
          for (const call of r.tool_calls) assert.ok(toolValidators[call.function.name](JSON.parse(call.function.arguments)), where);
        }
    } finally {
      coder.stop();
    }
  });

  // Llama 3.x JSON, Mistral [TOOL_CALLS]N[ARGS]{…} and gpt-oss harmony: the syntax comes from the
  // template, the markers are text in this vocabulary, and only the grammar makes the calls well-formed.
  for (const [syntax, file] of [["Llama 3.x JSON", "meta-llama-Llama-3.2-3B-Instruct.jinja"],
                                ["Mistral [ARGS]", "Mistral-Small-3.2-24B-Instruct-2506.jinja"],
                                ["gpt-oss harmony", "openai-gpt-oss-120b.jinja"]]) {
    test(`${syntax} (--chat-template ${file}): required / named calls parse and match; none gives no call`, async () => {
      const template = `${process.env.TINYLLM_SHARED ?? "../../../shared"}/golden/templates/templates/${file}`;
      const srv = startServer(process.env.TINYLLM_BIN, ["serve", "--model", MODEL, "--port", "0", "--max-context", "4096", "--chat-template", template]);
      try {
        const c = new OpenAI({ baseURL: `${await srv.url}/v1`, apiKey: "none", maxRetries: 0 });
        for (const seed of SEEDS)
          for (const stream of [false, true]) {
            const named = seed % 2 === 0;
            const r = await reply(c, { ...base(seed), tools: TOOLS, tool_choice: named ? { type: "function", function: { name: "add" } } : "required",
                                       parallel_tool_calls: false, max_tokens: 300 }, stream);
            const where = `seed ${seed}${stream ? " streamed" : ""}: ${JSON.stringify(r)}`;
            assert.equal(r.finish, "tool_calls", where);
            assert.equal(r.tool_calls.length, 1, where);
            if (named) assert.equal(r.tool_calls[0].function.name, "add", where);
            assert.ok(toolValidators[r.tool_calls[0].function.name](JSON.parse(r.tool_calls[0].function.arguments)), where);
            assert.ok(!/<\||\[TOOL_CALLS\]|\[ARGS\]/.test(r.content), where);
          }
        const none = await reply(c, { ...base(1), tools: TOOLS, tool_choice: "none", max_tokens: 40 }, false);
        assert.equal(none.tool_calls.length, 0, JSON.stringify(none));
      } finally {
        srv.stop();
      }
    });
  }

  test("a grammar that cannot finish within max_tokens ends with finish_reason length", async () => {
    for (const stream of [false, true]) {
      const r = await reply(client, { ...base(1), grammar: `root ::= "ab"{400}`, max_tokens: 8 }, stream);
      assert.equal(r.finish, "length");
      assert.ok(/^(ab)*a?$/.test(r.content), r.content);
    }
    const health = await fetch(`${await server.url}/health`);
    assert.equal(health.status, 200);
  });

  test("bad grammars and schemas are a 400 naming the rule or keyword", async () => {
    const bad = [
      [{ grammar: "root ::= value\n" }, /undefined rule 'value'/],
      [{ grammar: 'root ::= "a" [b-\n' }, /line 1 column/],
      [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", patternProperties: { "^a": {} } } } } }, /'patternProperties'/],
      [{ json_schema: { type: "array", uniqueItems: true } }, /'uniqueItems'/],
      // a $ref back to itself before any character: left recursion; through allOf it overflowed the stack
      [{ json_schema: { anyOf: [{ $ref: "#" }, { type: "null" }] } }, /'\$ref' # leads back to itself/],
      [{ json_schema: { type: "object", allOf: [{ $ref: "#" }] } }, /'allOf' nests deeper/],
    ];
    for (const [extra, message] of bad) {
      await assert.rejects(client.chat.completions.create({ ...base(1), ...extra }), (e) => e.status === 400 && message.test(e.message));
    }
  });
});
