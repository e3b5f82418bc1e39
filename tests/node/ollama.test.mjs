// The official `ollama` npm client against the ollama routes: list, show, ps, chat (whole and streamed
// NDJSON), generate, `format` (a schema or "json") validated by ajv, embed, and the final object's
// counts and nanosecond durations.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { Ollama } from "ollama";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { startServer, apiServers, isFake, isQwen3 } from "./server_process.mjs";
import { API_SCHEMAS } from "./schemas.mjs";

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
// Random weights write noise: only the grammar can make their output valid, so only they prove it.
const NEEDS_NOISE = "needs the random-weight qwen3 (../shared): only there is valid output the grammar's doing";

// The text of a chat or generate reply and its final object, streamed or whole.
async function ask(client, method, params, stream) {
  if (!stream) {
    const r = await client[method]({ ...params, stream: false });
    return { text: method === "chat" ? r.message.content : r.response, last: r };
  }
  let text = "", last = null;
  for await (const part of await client[method]({ ...params, stream: true })) {
    text += method === "chat" ? part.message.content : part.response;
    last = part;
  }
  return { text, last };
}

function checkFinal(r) {
  assert.equal(r.done, true);
  assert.ok(["stop", "length"].includes(r.done_reason), r.done_reason);
  assert.ok(r.prompt_eval_count > 0 && r.eval_count > 0);
  assert.ok(r.total_duration >= r.eval_duration && r.eval_duration > 0);
  assert.ok(r.total_duration < 600e9, "durations are nanoseconds of a short run");
}

for (const target of apiServers()) {
  describe(`ollama client → ${target.name}`, () => {
    let server, client;
    before(async () => {
      server = startServer(target.command, target.args);
      client = new Ollama({ host: await server.url, headers: { Authorization: "Bearer test-key" } });
    });
    after(() => server?.stop());

    test("version, list, show, ps", async () => {
      assert.match((await client.version()).version, /^\d+\.\d+\.\d+$/);
      const { models } = await client.list();
      assert.equal(models.length, 1);
      const name = models[0].name;
      assert.ok(name.length > 0);
      assert.equal(models[0].details.format, "gguf");
      if (!isFake(target)) assert.ok(models[0].size > 0);
      const show = await client.show({ model: name });
      assert.ok(show.capabilities.includes("completion"));
      assert.ok(Object.keys(show.model_info).includes("general.architecture"));
      if (target.name.includes("qwen3")) {
        assert.ok(show.capabilities.includes("tools") && show.capabilities.includes("embedding"));
        assert.match(show.template, /tool_call/);
      }
      const ps = await client.ps();
      assert.equal(ps.models[0].name, name);
    });

    test("chat", async () => {
      const r = await client.chat({ model: "any", messages: [{ role: "user", content: "Hello" }], stream: false, options: { num_predict: 20, temperature: 0 } });
      assert.equal(r.message.role, "assistant");
      assert.equal(typeof r.message.content, "string");
      checkFinal(r);
      if (isFake(target)) assert.equal(r.message.content, "You said: **Hello**.");
    });

    test("chat streaming (NDJSON, the default)", async () => {
      const parts = [];
      for await (const part of await client.chat({ model: "any", messages: [{ role: "user", content: "Stream please" }], stream: true, options: { num_predict: 40 } }))
        parts.push(part);
      assert.ok(parts.length > 2);
      assert.ok(parts.slice(0, -1).every((p) => p.done === false));
      checkFinal(parts.at(-1));
      const text = parts.map((p) => p.message.content).join("");
      if (isFake(target)) assert.equal(text, "You said: **Stream please**.");
    });

    test("chat with tools", async () => {
      const tools = [{ type: "function", function: { name: "lookup", description: "Looks up", parameters: { type: "object", properties: { query: { type: "string" } } } } }];
      const r = await client.chat({ model: "any", messages: [{ role: "user", content: "Find owls" }], tools, stream: false, options: { num_predict: 120 } });
      if (isFake(target)) assert.deepEqual(r.message.tool_calls, [{ function: { name: "lookup", arguments: { query: "Find owls" } } }]);
      const call = r.message.tool_calls?.[0] ?? { function: { name: "lookup", arguments: { query: "owls" } } };
      const back = await client.chat({
        model: "any", tools, stream: false, options: { num_predict: 60 },
        messages: [{ role: "user", content: "Find owls" }, { role: "assistant", content: "", tool_calls: [call] }, { role: "tool", content: "2 owls", tool_name: "lookup" }],
      });
      if (isFake(target)) assert.equal(back.message.content, "The tool said: 2 owls.");
      checkFinal(back);
    });

    test("generate, whole and streamed", async () => {
      const r = await client.generate({ model: "any", prompt: "Once upon a time", stream: false, options: { num_predict: 40, seed: 1 } });
      assert.equal(typeof r.response, "string");
      checkFinal(r);
      if (isFake(target)) assert.equal(r.response, "You said: **Once upon a time**.");
      let text = "", last = null;
      for await (const part of await client.generate({ model: "any", prompt: "Once upon a time", system: "Tell stories.", stream: true, options: { num_predict: 40 } })) {
        text += part.response;
        last = part;
      }
      checkFinal(last);
      if (isFake(target)) assert.equal(text, "You said: **Once upon a time**.");
    });

    test("format with a JSON schema: chat and generate replies parse and validate, streamed and not", { skip: !isQwen3(target) && NEEDS_NOISE }, async () => {
      for (const { name, schema } of API_SCHEMAS) {
        const validate = ajv.compile(schema);
        for (const seed of [1, 2])
          for (const [method, stream] of [["chat", false], ["chat", true], ["generate", seed === 1]]) {
            const params = method === "chat" ? { messages: [{ role: "user", content: "Answer in JSON." }] } : { prompt: "Answer in JSON." };
            const r = await ask(client, method, { model: "any", ...params, format: schema, options: { seed, temperature: 1.0, num_predict: 200 } }, stream);
            const where = `${name} ${method} seed ${seed}${stream ? " streamed" : ""}: ${JSON.stringify(r.text)}`;
            assert.equal(r.last.done_reason, "stop", where);
            let value;
            assert.doesNotThrow(() => (value = JSON.parse(r.text)), where);
            assert.ok(validate(value), `${where} ${ajv.errorsText(validate.errors)}`);
          }
      }
      const o = await ask(client, "chat", { model: "any", messages: [{ role: "user", content: "JSON" }], format: "json", options: { seed: 3, num_predict: 300 } }, true);
      if (o.last.done_reason === "stop") assert.equal(typeof JSON.parse(o.text), "object", o.text);
      else assert.ok(o.text.startsWith("{"), o.text);  // free strings may outrun num_predict on noise
    });

    test("a bad format is a 400 naming it", async () => {
      await assert.rejects(client.chat({ model: "any", messages: [{ role: "user", content: "Hi" }], format: { type: "array", uniqueItems: true }, stream: false }),
        (e) => e.status_code === 400 && /'uniqueItems'/.test(e.error));
    });

    test("embed", async () => {
      if (target.name.includes("stories260K")) {
        await assert.rejects(client.embed({ model: "any", input: "Hi" }), (e) => e.status_code === 400 && /pooling/.test(e.error));
        return;
      }
      const r = await client.embed({ model: "any", input: ["Hello world", "Goodbye"] });
      assert.equal(r.embeddings.length, 2);
      for (const v of r.embeddings) assert.ok(Math.abs(Math.sqrt(v.reduce((s, x) => s + x * x, 0)) - 1) < 1e-4);
      assert.ok(r.prompt_eval_count > 0);
    });

    test("errors are {error} objects the client raises", async () => {
      await assert.rejects(client.chat({ model: "any", messages: "not a list", stream: false }), (e) => e.status_code === 400 && /messages/.test(e.error));
    });
  });
}
