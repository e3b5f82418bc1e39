// The official `openai` npm client against our server: a chat, a streamed chat with include_usage,
// and a typed error for a prompt longer than the context.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, servers } from "./server_process.mjs";

for (const target of servers()) {
  describe(`openai client → ${target.name}`, () => {
    let server, client;
    before(async () => {
      server = startServer(target.command, target.args);
      client = new OpenAI({ baseURL: (await server.url) + "/v1", apiKey: "test-key", maxRetries: 0 });
    });
    after(() => server?.stop());

    test("lists the model", async () => {
      const models = await client.models.list();
      assert.equal(models.data.length, 1);
      assert.ok(models.data[0].id.length > 0);
    });

    test("completes a chat", async () => {
      const r = await client.chat.completions.create({ model: "any", messages: [{ role: "user", content: "Hello" }], max_tokens: 20 });
      assert.match(r.id, /^chatcmpl-/);
      assert.equal(r.object, "chat.completion");
      assert.equal(r.choices[0].message.role, "assistant");
      assert.equal(typeof r.choices[0].message.content, "string");
      assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
      assert.ok(r.usage.prompt_tokens > 0);
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
      if (target.name === "tinyllm_fake") assert.equal(r.choices[0].message.content, "You said: **Hello**.");
    });

    test("streams a chat with include_usage", async () => {
      const stream = await client.chat.completions.create({
        model: "any", messages: [{ role: "user", content: "Stream please" }], max_tokens: 40,
        stream: true, stream_options: { include_usage: true },
      });
      let content = "", finish = null, usage = null, ids = new Set(), n = 0;
      for await (const chunk of stream) {
        n++;
        ids.add(chunk.id);
        if (chunk.usage) usage = chunk.usage;
        if (chunk.choices.length === 0) continue;
        content += chunk.choices[0].delta.content ?? "";
        finish = chunk.choices[0].finish_reason ?? finish;
      }
      assert.ok(n > 3);
      assert.equal(ids.size, 1);
      assert.ok(["stop", "length"].includes(finish));
      assert.ok(usage && usage.completion_tokens > 0 && usage.prompt_tokens > 0);
      if (target.name === "tinyllm_fake") assert.equal(content, "You said: **Stream please**.");
    });

    test("gets a typed error for an oversized prompt", async () => {
      const huge = "word ".repeat(400);
      await assert.rejects(
        client.chat.completions.create({ model: "any", messages: [{ role: "user", content: huge }] }),
        (e) => {
          assert.ok(e instanceof OpenAI.BadRequestError, `expected BadRequestError, got ${e?.constructor?.name}: ${e}`);
          assert.equal(e.status, 400);
          assert.equal(e.code, "context_length_exceeded");
          return true;
        });
    });

    test("gets a typed error for a wrong API key", async () => {
      const wrong = new OpenAI({ baseURL: client.baseURL, apiKey: "nope", maxRetries: 0 });
      await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    });
  });
}
