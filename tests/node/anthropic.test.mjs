// The official @anthropic-ai/sdk against /v1/messages: create, stream + finalMessage(), a tool round
// trip, forced tool calls (tool_choice any / tool) validated by ajv, countTokens (billing header
// stripped) and typed errors. The fake checks exact text; the real
// models check the shapes the SDK hands its users.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import Ajv2020 from "ajv/dist/2020.js";
import { startServer, apiServers, isFake, isQwen3 } from "./server_process.mjs";
import { STRICT_TOOLS } from "./schemas.mjs";

const ajv = new Ajv2020({ strict: false, allErrors: true });
// Random weights write noise: only the grammar can make a forced call valid, so only they prove it.
const NEEDS_NOISE = "needs the random-weight qwen3 (../shared): only there is a valid call the grammar's doing";

const LOOKUP = {
  name: "lookup", description: "Looks something up.",
  input_schema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
};

for (const target of apiServers()) {
  describe(`anthropic client → ${target.name}`, () => {
    let server, client;
    before(async () => {
      server = startServer(target.command, target.args);
      client = new Anthropic({ baseURL: await server.url, apiKey: null, authToken: "test-key", maxRetries: 0 });
    });
    after(() => server?.stop());

    test("creates a message", async () => {
      const r = await client.messages.create({ model: "any", max_tokens: 40, messages: [{ role: "user", content: "Hello" }] });
      assert.match(r.id, /^msg_/);
      assert.equal(r.type, "message");
      assert.equal(r.role, "assistant");
      assert.ok(["end_turn", "max_tokens", "stop_sequence"].includes(r.stop_reason), r.stop_reason);
      assert.ok(r.usage.input_tokens + r.usage.cache_read_input_tokens > 0);
      assert.ok(r.usage.output_tokens > 0);
      for (const block of r.content) assert.ok(["text", "thinking"].includes(block.type));
      if (isFake(target)) {
        assert.deepEqual(r.content, [{ type: "text", text: "You said: **Hello**." }]);
        assert.equal(r.stop_reason, "end_turn");
      }
    });

    test("stops at a stop sequence and says which", async () => {
      if (!isFake(target)) return;  // only the fake's text is known in advance
      const r = await client.messages.create({
        model: "any", max_tokens: 40, stop_sequences: ["**."], messages: [{ role: "user", content: "Hi" }],
      });
      assert.equal(r.stop_reason, "stop_sequence");
      assert.equal(r.stop_sequence, "**.");
      assert.equal(r.content[0].text, "You said: **Hi");
    });

    test("streams, and finalMessage() assembles the same message", async () => {
      const stream = client.messages.stream({
        model: "any", max_tokens: 40, system: "Be brief.", messages: [{ role: "user", content: "Stream please" }],
      });
      const types = [];
      let text = "";
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
      }
      const m = await stream.finalMessage();
      assert.equal(types[0], "message_start");
      assert.equal(types.at(-1), "message_stop");
      assert.ok(types.includes("message_delta"));
      assert.equal(types.filter((t) => t === "content_block_start").length, types.filter((t) => t === "content_block_stop").length);
      assert.ok(m.usage.output_tokens > 0);
      assert.ok(["end_turn", "max_tokens", "stop_sequence", "tool_use"].includes(m.stop_reason));
      const finalText = m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
      assert.equal(finalText, text);
      if (isFake(target)) assert.equal(text, "You said: **Stream please**.");
    });

    test("tool round trip: tool_use, then tool_result", async () => {
      const question = { role: "user", content: "Weather in Paris?" };
      const first = await client.messages.create({ model: "any", max_tokens: 120, tools: [LOOKUP], messages: [question] });
      let toolUse = first.content.find((b) => b.type === "tool_use");
      if (isFake(target)) {
        assert.equal(first.stop_reason, "tool_use");
        assert.equal(toolUse.name, "lookup");
        assert.deepEqual(toolUse.input, { query: "Weather in Paris?" });
      } else {
        toolUse ??= { type: "tool_use", id: "toolu_1", name: "lookup", input: { query: "Paris" } };  // random weights call nothing
      }
      const second = await client.messages.create({
        model: "any", max_tokens: 60, tools: [LOOKUP],
        messages: [question, { role: "assistant", content: [toolUse] },
                   { role: "user", content: [{ type: "tool_result", tool_use_id: toolUse.id, content: "sunny, 21 °C" }] }],
      });
      assert.equal(second.type, "message");
      if (isFake(target)) assert.deepEqual(second.content, [{ type: "text", text: "The tool said: sunny, 21 °C." }]);
    });

    test("streams a tool call as input_json_delta", async () => {
      const stream = client.messages.stream({
        model: "any", max_tokens: 120, tools: [LOOKUP], tool_choice: { type: "any" },
        messages: [{ role: "user", content: "Find cats" }],
      });
      const deltas = [];
      stream.on("streamEvent", (e) => { if (e.type === "content_block_delta") deltas.push(e.delta.type); });
      const m = await stream.finalMessage();
      if (isFake(target)) {
        assert.ok(deltas.includes("input_json_delta"));
        assert.equal(m.stop_reason, "tool_use");
        assert.deepEqual(m.content.find((b) => b.type === "tool_use").input, { query: "Find cats" });
      } else {
        assert.ok(["tool_use", "max_tokens", "end_turn"].includes(m.stop_reason));
      }
    });

    test("tool_choice any / tool: every call parses and matches its input_schema, streamed and not", { skip: !isQwen3(target) && NEEDS_NOISE }, async () => {
      const tools = STRICT_TOOLS.map((t) => ({ name: t.name, description: "A tool.", input_schema: t.parameters }));
      const validators = Object.fromEntries(tools.map((t) => [t.name, ajv.compile(t.input_schema)]));
      const cases = [
        { tool_choice: { type: "any" }, names: ["get_weather", "add"] },
        { tool_choice: { type: "tool", name: "add" }, names: ["add"] },
        { tool_choice: { type: "any", disable_parallel_tool_use: true }, names: ["get_weather", "add"], one: true },
      ];
      for (const c of cases)
        for (const i of [1, 2, 3])
          for (const stream of [false, true]) {
            const params = { model: "any", max_tokens: 300, temperature: 1.0, tools, tool_choice: c.tool_choice,
                             messages: [{ role: "user", content: `Call a tool, please (${i}).` }] };
            const m = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
            const where = `${JSON.stringify(c.tool_choice)} #${i}${stream ? " streamed" : ""}: ${JSON.stringify(m.content)}`;
            // The grammar ends the turn after one call only when parallel calls are off; otherwise random
            // weights may keep calling until max_tokens, and every call completed by then must still be valid.
            if (c.one) assert.equal(m.stop_reason, "tool_use", where);
            else assert.ok(["tool_use", "max_tokens"].includes(m.stop_reason), where);
            const uses = m.content.filter((b) => b.type === "tool_use");
            assert.ok(uses.length >= 1, where);
            if (c.one) assert.equal(uses.length, 1, where);
            for (const u of uses) {
              assert.ok(c.names.includes(u.name), where);
              assert.ok(validators[u.name](u.input), `${where} ${ajv.errorsText(validators[u.name].errors)}`);
            }
          }
    });

    test("counts tokens, ignoring Claude Code's per-request billing header", async () => {
      const messages = [{ role: "user", content: "How many tokens is this?" }];
      const plain = await client.messages.countTokens({ model: "any", system: "You help.", messages });
      const billed = await client.messages.countTokens({
        model: "any", messages,
        system: [{ type: "text", text: "x-anthropic-billing-header: cc_version=2.0.14.abc; cc_entrypoint=cli; cch=5f3e1;" },
                 { type: "text", text: "You help." }],
      });
      const longer = await client.messages.countTokens({ model: "any", system: "You help.", messages: [...messages, { role: "assistant", content: "Quite a few, as it happens." }, ...messages] });
      assert.ok(plain.input_tokens > 0);
      assert.equal(billed.input_tokens, plain.input_tokens);
      assert.ok(longer.input_tokens > plain.input_tokens);
    });

    test("gets typed Anthropic errors", async () => {
      await assert.rejects(client.messages.create({ model: "any", messages: [{ role: "user", content: "no max_tokens" }] }), (e) => {
        assert.ok(e instanceof Anthropic.BadRequestError, `got ${e?.constructor?.name}: ${e}`);
        assert.equal(e.error.type, "error");
        assert.equal(e.error.error.type, "invalid_request_error");
        assert.match(e.error.error.message, /max_tokens/);
        return true;
      });
      await assert.rejects(client.messages.create({ model: "any", max_tokens: 5, messages: [{ role: "user", content: "word ".repeat(2000) }] }),
        (e) => e instanceof Anthropic.BadRequestError && e.error.error.type === "invalid_request_error");
      const wrong = new Anthropic({ baseURL: client.baseURL, apiKey: null, authToken: "nope", maxRetries: 0 });
      await assert.rejects(wrong.messages.create({ model: "any", max_tokens: 5, messages: [{ role: "user", content: "Hi" }] }),
        (e) => e instanceof Anthropic.AuthenticationError);
    });

    test("thinking: enabled comes back as a thinking block, disabled as none", async () => {
      const ask = (type) => client.messages.create({
        model: "any", max_tokens: 30, thinking: type === "enabled" ? { type, budget_tokens: 1024 } : { type },
        messages: [{ role: "user", content: "Think" }],
      });
      if (isFake(target)) {  // the fake's template opens <think> when asked to; its whole reply is then reasoning
        const r = await ask("enabled");
        assert.equal(r.content[0].type, "thinking");
        assert.equal(r.content[0].thinking, "You said: **Think**.");
      }
      const off = await ask("disabled");
      assert.ok(!off.content.some((b) => b.type === "thinking"));
    });
  });
}
