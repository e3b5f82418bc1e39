// The frameworks apps are built on, unchanged, over our OpenAI-compatible API: the Vercel AI SDK with
// @ai-sdk/openai-compatible (generateText, streamText) and LangChain's ChatOpenAI (invoke, stream).
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";
import { ChatOpenAI } from "@langchain/openai";
import { startServer, apiServers, isFake } from "./server_process.mjs";

for (const target of apiServers()) {
  describe(`frameworks → ${target.name}`, () => {
    let server, baseURL;
    before(async () => {
      server = startServer(target.command, target.args);
      baseURL = (await server.url) + "/v1";
    });
    after(() => server?.stop());

    const provider = () => createOpenAICompatible({ name: "tinyllm", baseURL, apiKey: "test-key", includeUsage: true });

    test("AI SDK generateText", async () => {
      const r = await generateText({ model: provider()("any"), prompt: "Hello", maxOutputTokens: 20, maxRetries: 0 });
      assert.equal(typeof r.text, "string");
      assert.ok(["stop", "length"].includes(r.finishReason), r.finishReason);
      assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0);
      if (isFake(target)) assert.equal(r.text, "You said: **Hello**.");
    });

    test("AI SDK streamText", async () => {
      const errors = [];
      const r = streamText({ model: provider()("any"), prompt: "Stream please", maxOutputTokens: 40, maxRetries: 0, onError: ({ error }) => errors.push(error) });
      let text = "", n = 0;
      for await (const delta of r.textStream) { text += delta; n++; }
      assert.deepEqual(errors, []);
      assert.ok(["stop", "length"].includes(await r.finishReason));
      assert.ok(n > 0 || !isFake(target));
      assert.equal(await r.text, text);
      if (isFake(target)) assert.equal(text, "You said: **Stream please**.");
    });

    const chat = () => new ChatOpenAI({ model: "any", apiKey: "test-key", configuration: { baseURL }, maxTokens: 40, maxRetries: 0 });

    test("LangChain ChatOpenAI invoke", async () => {
      const m = await chat().invoke("Hello");
      assert.equal(typeof m.content, "string");
      assert.ok(m.usage_metadata.input_tokens > 0);
      if (isFake(target)) assert.equal(m.content, "You said: **Hello**.");
    });

    test("LangChain ChatOpenAI stream", async () => {
      let text = "", n = 0;
      for await (const chunk of await chat().stream("Stream please")) { text += chunk.content; n++; }
      assert.ok(n > 0);
      if (isFake(target)) assert.equal(text, "You said: **Stream please**.");
    });
  });
}
