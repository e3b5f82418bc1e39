// Hostile requests against the real server process (tinyllm_fake over raw sockets on 127.0.0.1): the
// attacks of issue #12 each get a 4xx/413/503 with an OpenAI error object, slow and idle connections
// do not starve others, the process stays alive within 100 MB of its starting RSS, and SIGTERM during
// four streams ends every one of them cleanly and exits 0.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import fs from "node:fs";
import { startServer } from "./server_process.mjs";

const KEY = "test-key";
const MAX_BODY = 2 * 1024 * 1024;

// Sends `data` (string, Buffer, or a function writing to the socket) and reads one response.
function raw(port, data, { timeout = 10000, halfClose = false } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => { sock.destroy(); reject(new Error("no response in time")); }, timeout);
    const finish = () => {
      clearTimeout(timer);
      const text = buf.toString("latin1");
      const headEnd = text.indexOf("\r\n\r\n");
      const status = headEnd > 0 ? Number(text.slice(9, 12)) : 0;
      const head = text.slice(0, headEnd);
      const body = buf.subarray(headEnd + 4).toString("utf8");
      resolve({ status, head, body, json: () => JSON.parse(body) });
    };
    const complete = () => {
      const text = buf.toString("latin1");
      let headEnd = text.indexOf("\r\n\r\n");
      while (headEnd > 0 && text.startsWith("HTTP/1.1 100", 0) && text.length > headEnd + 4) {  // skip 100 Continue
        buf = buf.subarray(headEnd + 4);
        return complete();
      }
      if (headEnd < 0) return false;
      const m = /content-length: (\d+)/i.exec(text.slice(0, headEnd));
      return m && buf.length >= headEnd + 4 + Number(m[1]);
    };
    sock.on("data", (d) => { buf = Buffer.concat([buf, d]); if (complete()) { sock.destroy(); finish(); } });
    sock.on("end", finish);
    sock.on("close", finish);
    sock.on("error", () => {});
    sock.on("connect", async () => {
      if (typeof data === "function") await data(sock);
      else sock.write(data);
      if (halfClose) sock.end();
    });
  });
}

const post = (path, body, headers = {}) => {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const h = { Host: "127.0.0.1", "Content-Type": "application/json", Authorization: `Bearer ${KEY}`, "Content-Length": b.length, ...headers };
  let head = `POST ${path} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(h)) if (v !== undefined) head += `${k}: ${v}\r\n`;
  return Buffer.concat([Buffer.from(head + "\r\n"), b]);
};
const get = (path, extra = "") => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\n${extra}\r\n`;

function assertError(r, status) {
  if (Array.isArray(status)) assert.ok(status.includes(r.status), `status ${r.status}, expected one of ${status}: ${r.body.slice(0, 300)}`);
  else assert.equal(r.status, status, r.body.slice(0, 300));
  const e = r.json().error;
  assert.equal(typeof e.message, "string");
  assert.match(e.message, /^\[server\] /);
  assert.equal(typeof e.type, "string");
  return e;
}

const rss = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]) * 1024;
const nest = (n) => "[".repeat(n) + "]".repeat(n);
const chatBody = (extra = {}) => JSON.stringify({ messages: [{ role: "user", content: "Hello" }], max_tokens: 5, ...extra });

describe("hostile requests → tinyllm_fake", () => {
  let server, port, rss0;
  before(async () => {
    server = startServer(process.env.TINYLLM_FAKE, ["serve", "--port", "0", "--ctx", "2048", "--api-key", KEY,
      "--max-body", String(MAX_BODY), "--header-timeout", "2000"]);
    port = Number(new URL(await server.url).port);
    assert.equal((await raw(port, get("/health"))).status, 200);
    rss0 = rss(server.child.pid);
  });
  after(() => server?.stop());

  test("~240 KB of nested brackets anywhere in the JSON is a 400 naming the depth limit", async () => {
    const cases = [
      `{"prompt":${nest(120000)}}`,
      `{"messages":[{"role":"user","content":${nest(120000)}}]}`,
      `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"a":${nest(120000)}}}`,
      `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${nest(80000)}}}]}`,
    ];
    for (const [i, body] of cases.entries()) {
      const path = i === 0 ? "/v1/completions" : "/v1/chat/completions";
      const e = assertError(await raw(port, post(path, body)), 400);
      assert.match(e.message, /deeper than 256/);
    }
    const args = JSON.stringify(nest(120000));  // tool-call arguments: a JSON string holding the nesting
    const body = `{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":${args}}}]},{"role":"user","content":"x"}]}`;
    assert.match(assertError(await raw(port, post("/v1/chat/completions", body)), 400).message, /deeper than 256/);
    // The same from a web page's text/plain POST never reaches the parser.
    assertError(await raw(port, post("/v1/completions", `{"prompt":${nest(120000)}}`, { "Content-Type": "text/plain" })), 415);
  });

  test("bodies over --max-body are 413 however they are framed; compressed bodies 415; length-less 411", async () => {
    // Content-Length over the limit: answered at once, before any of the body is sent.
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${512 << 20}\r\n\r\n`;
    assertError(await raw(port, head), 413);
    // Chunked: counted as it arrives.
    const chunked = async (sock) => {
      sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
      const chunk = "x".repeat(256 << 10);
      for (let i = 0; i < 12 && !sock.destroyed; i++) sock.write(`${(chunk.length).toString(16)}\r\n${chunk}\r\n`);
    };
    assertError(await raw(port, chunked), 413);
    // No length, body ended by a half-close.
    const noLength = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\n\r\n${chatBody()}`;
    assertError(await raw(port, noLength, { halfClose: true }), 411);
    for (const encoding of ["gzip", "deflate", "br"])
      assertError(await raw(port, post("/v1/chat/completions", Buffer.from([0x1f, 0x8b, 8, 0]), { "Content-Encoding": encoding })), 415);
  });

  test("huge or numerous headers are 431, malformed heads 400, and a chunked body within the limit is served", async () => {
    assertError(await raw(port, get("/v1/models", `X-Big: ${"a".repeat(40000)}\r\n`)), 431);
    assertError(await raw(port, get("/v1/models", Array.from({ length: 200 }, (_, i) => `X-${i}: v\r\n`).join(""))), 431);
    assertError(await raw(port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Nul: a\0b\r\n\r\n"), 400);
    assertError(await raw(port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n"), 400);
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { "Transfer-Encoding": "chunked" })), 400);  // both framings
    const body = chatBody();
    const ok = await raw(port, `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    assert.equal(ok.status, 200, ok.body);
    assert.equal(ok.json().choices[0].message.content.length > 0, true);
  });

  test("Range never produces a multipart or partial answer", async () => {
    const whole = await raw(port, get("/"));
    const ranges = Array.from({ length: 2000 }, (_, i) => `${i}-${i + 1}`).join(",");
    const r = await raw(port, get("/", `Range: bytes=${ranges}\r\n`));
    assert.equal(r.status, 200);
    assert.equal(r.body.length, whole.body.length);
    assert.doesNotMatch(r.head, /multipart/i);
  });

  test("auth comes before the body: no key 401 at once, case-insensitive Bearer, x-api-key, /health open", async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n`;
    assert.equal(assertError(await raw(port, head, { timeout: 2000 }), 401).code, "invalid_api_key");
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { Authorization: "Bearer wrong" })), 401);
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { Authorization: `Bearer ${KEY}x` })), 401);
    assert.equal((await raw(port, post("/v1/chat/completions", chatBody(), { Authorization: `bearer ${KEY}` }))).status, 200);
    assert.equal((await raw(port, post("/v1/chat/completions", chatBody(), { Authorization: undefined, "x-api-key": KEY }))).status, 200);
    assert.equal((await raw(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")).status, 200);
  });

  test("browsers: foreign Host (DNS rebinding) and foreign Origin are 403, form/text bodies 415", async () => {
    assertError(await raw(port, "GET /v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n"), 403);
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { Host: "evil.example:8080" })), 403);
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { Origin: "http://evil.example" })), 403);
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { Origin: "null" })), 403);
    assertError(await raw(port, post("/v1/chat/completions", chatBody(), { "Content-Type": "multipart/form-data; boundary=x" })), 415);
    const same = await raw(port, post("/v1/chat/completions", chatBody(), { Host: `127.0.0.1:${port}`, Origin: `http://127.0.0.1:${port}` }));
    assert.equal(same.status, 200);  // the web UI's own page
    assert.equal((await raw(port, post("/v1/chat/completions", chatBody(), { Host: `localhost:${port}` }))).status, 200);
  });

  test("invalid UTF-8, NUL bytes and wrong types in every field are 400s", async () => {
    const bad = [
      Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xc3, 0x28]), Buffer.from('"}]}')]),
      Buffer.from('{"messages":[{"role":"user","content":"a\0b"}]}'),
      Buffer.from("\0\0\0\0"),
      Buffer.from('{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}}'),
      Buffer.from('{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"bos_token":"<|im_start|>system"}}'),
      Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "x" }], stop: Array(17).fill("a") })),
      Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "x" }], logit_bias: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [i, 1])) })),
      Buffer.from(JSON.stringify({ messages: Array(5000).fill({ role: "user", content: "x" }) })),
      Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "x" }], tools: Array(300).fill({ type: "function", function: { name: "f" } }) })),
      Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "x" }], n: 1000000 })),
    ];
    for (const body of bad) assertError(await raw(port, post("/v1/chat/completions", body)), 400);
    const fields = ["model", "messages", "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "stop", "seed",
      "logit_bias", "tools", "tool_choice", "stream", "stream_options", "n", "logprobs", "top_logprobs", "presence_penalty",
      "frequency_penalty", "chat_template_kwargs"];
    const wrong = [{ x: 1 }, [1, [2]], "text", -1e308, 1e308, true, -7];
    let n400 = 0;
    for (const field of fields)
      for (const value of wrong) {
        const r = await raw(port, post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 3, [field]: value })));
        assert.ok([200, 400].includes(r.status), `${field}=${JSON.stringify(value)}: ${r.status} ${r.body.slice(0, 200)}`);
        if (r.status === 400) { assertError(r, 400); n400++; }
      }
    assert.ok(n400 > fields.length * 3);
  });

  test("a prompt that cannot fit the context by its size alone is refused at once", async () => {
    const big = "a".repeat(1500000);  // under --max-body; ~50 ms to refuse on an idle machine
    for (const [path, body] of [["/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: big }] })],
      ["/v1/completions", JSON.stringify({ prompt: big })], ["/tokenize", JSON.stringify({ content: big })]]) {
      const t0 = Date.now();
      assert.equal(assertError(await raw(port, post(path, body)), 400).code, "context_length_exceeded");
      // Each on its own clock, with room for a CI machine busy with other tests (three together took 3.6 s there).
      assert.ok(Date.now() - t0 < 3000, `${path} took ${Date.now() - t0} ms`);
    }
  });

  test("control characters in the path are escaped in the log", async () => {
    const r = await raw(port, get("/%0a%1b[31mfake%20line"));
    assert.equal(r.status, 404);
    await new Promise((res) => setTimeout(res, 100));
    assert.ok(!server.log().includes("\x1b"), "raw ESC in the log");
    assert.match(server.log(), /\\x0a\\x1b\[31mfake line/);
  });

  test("300 idle connections do not delay a normal request", async () => {
    const idle = await Promise.all(Array.from({ length: 300 }, () => new Promise((res) => {
      const s = net.connect(port, "127.0.0.1", () => res(s));
      s.on("error", () => {});
    })));
    const t0 = Date.now();
    const r = await raw(port, post("/v1/chat/completions", chatBody()), { timeout: 5000 });
    assert.equal(r.status, 200);
    assert.ok(Date.now() - t0 < 5000);
    for (const s of idle) s.destroy();
  });

  test("75 slowloris connections do not starve /health, and are cut at the header deadline", async () => {
    const slow = Array.from({ length: 75 }, () => {
      const s = net.connect(port, "127.0.0.1");
      s.on("error", () => {});
      const text = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + "a".repeat(100);
      let i = 0;
      s.closedBy = new Promise((res) => s.on("close", res));
      s.timer = setInterval(() => { if (i < text.length && !s.destroyed) s.write(text[i++]); }, 200);
      return s;
    });
    await new Promise((res) => setTimeout(res, 600));
    for (let k = 0; k < 3; k++) {
      const t0 = Date.now();
      assert.equal((await raw(port, get("/health"), { timeout: 2000 })).status, 200);
      assert.ok(Date.now() - t0 < 1000);
    }
    // --header-timeout 2000: the server answers 408 and closes them.
    await Promise.race([Promise.all(slow.map((s) => s.closedBy)), new Promise((res) => setTimeout(res, 5000))]);
    for (const s of slow) { clearInterval(s.timer); assert.ok(s.destroyed || s.readyState === "closed" || s.readableEnded, "a slow connection is still open"); s.destroy(); }
  });

  // Every API's request, as full as this server reads it; then each value in it, at any depth, replaced by
  // values of other types. Each variant is answered 200 or a 400 that names the field (never a JSON
  // library's type error, never a 500 or a dropped connection).
  test("a wrong type at any depth of any API's request is a 200 or a 400 naming the field", async () => {
    const schema = { type: "object", properties: { a: { type: ["string", "null"], minLength: 1, maxLength: 5 }, b: { type: "integer" } }, required: ["a"] };
    const requests = [
      ["/v1/chat/completions", { max_tokens: 2, messages: [{ role: "system", content: "s" }, { role: "user", content: [{ type: "text", text: "Hi" }] },
        { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "c1", content: "r" }],
        tools: [{ type: "function", function: { name: "f", description: "d", parameters: schema } }], tool_choice: { type: "function", function: { name: "f" } } }],
      ["/v1/chat/completions", { max_tokens: 2, messages: [{ role: "user", content: "Hi" }], response_format: { type: "json_schema", json_schema: { name: "n", schema } } }],
      ["/v1/completions", { prompt: "Hi", max_tokens: 2, stop: ["x"], logit_bias: { 1: 1 }, grammar: 'root ::= "a"' }],
      ["/v1/messages", { model: "m", max_tokens: 2, system: [{ type: "text", text: "s" }],
        messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] },
          { role: "assistant", content: [{ type: "thinking", thinking: "t" }, { type: "tool_use", id: "t1", name: "f", input: { a: "x" } }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "r" }], is_error: false }] }],
        tools: [{ name: "f", description: "d", input_schema: schema }], tool_choice: { type: "any", disable_parallel_tool_use: true } }],
      ["/v1/responses", { max_output_tokens: 2, instructions: "s",
        input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "Hi" }] },
          { type: "function_call", call_id: "c1", name: "f", arguments: "{}" }, { type: "function_call_output", call_id: "c1", output: "r" }],
        tools: [{ type: "function", name: "f", parameters: schema }], tool_choice: { type: "function", name: "f" } }],
      ["/v1/responses", { max_output_tokens: 2, input: "Hi", text: { format: { type: "json_schema", name: "n", schema } } }],
      ["/api/chat", { model: "m", stream: false, options: { num_predict: 2, temperature: 0.5, stop: ["x"] },
        messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: { a: "x" } } }] },
          { role: "tool", content: "r", tool_name: "f" }],
        tools: [{ type: "function", function: { name: "f", parameters: schema } }], format: schema }],
      ["/api/generate", { model: "m", prompt: "Hi", system: "s", raw: false, stream: false, options: { num_predict: 2 } }],
      ["/tokenize", { content: "Hi", add_special: true, with_pieces: true }],
      ["/detokenize", { tokens: [1, 2] }],
    ];
    const wrong = [{ x: 1 }, [1], "text", -1, 1.5, true, null];
    // Every path into the request (objects' keys and arrays' elements), leaves and containers alike.
    const paths = (v, at = []) => (v && typeof v === "object")
      ? Object.keys(v).flatMap((k) => [[...at, k], ...paths(v[k], [...at, k])]) : [];
    const replaced = (v, path, value) => {
      const copy = structuredClone(v);
      let o = copy;
      for (const k of path.slice(0, -1)) o = o[k];
      o[path.at(-1)] = value;
      return copy;
    };
    let n = 0, n400 = 0;
    for (const [url, body] of requests) {
      const base = await raw(port, post(url, JSON.stringify(body), { Connection: "close" }));
      assert.equal(base.status, 200, `${url} ${JSON.stringify(body).slice(0, 80)}: ${base.body.slice(0, 300)}`);
      for (const path of paths(body))
        for (const value of wrong) {
          if (path.length === 1 && path[0] === "stream") continue;  // a stream is framed differently (tested above)
          const variant = replaced(body, path, value);
          const r = await raw(port, post(url, JSON.stringify(variant), { Connection: "close" }));
          const what = `${url} ${path.join(".")}=${JSON.stringify(value)}: ${r.status} ${r.body.slice(0, 300)}`;
          assert.ok([200, 400].includes(r.status), what);
          n++;
          if (r.status !== 400) continue;
          n400++;
          const e = r.json().error;
          const message = typeof e === "string" ? e : e.message;  // ollama's {"error": "…"}
          assert.match(message, /^\[[a-z_]+\] /, what);  // the part of the server that refused it
          assert.doesNotMatch(message, /json\.exception/, what);
        }
    }
    assert.ok(n400 > n / 3, `${n400} of ${n} variants refused`);
    assert.equal(server.child.exitCode, null);
  });

  test("afterwards the server is alive, answers, and its RSS is within 100 MB of the start", async () => {
    const r = await raw(port, post("/v1/chat/completions", chatBody()));
    assert.equal(r.status, 200);
    assert.equal(server.child.exitCode, null);
    const grown = rss(server.child.pid) - rss0;
    assert.ok(grown < 100 * 1024 * 1024, `RSS grew by ${(grown / 1048576).toFixed(1)} MB`);
  });
});

describe("SIGTERM during four streams", () => {
  test("every stream ends cleanly with [DONE] and the process exits 0 within the timeout", async () => {
    const server = startServer(process.env.TINYLLM_FAKE, ["serve", "--port", "0", "--delay", "20", "--words", "2000", "--shutdown-timeout", "3"]);
    const port = Number(new URL(await server.url).port);
    const body = JSON.stringify({ messages: [{ role: "user", content: "Go" }], stream: true, max_tokens: 2000 });
    const streams = Array.from({ length: 4 }, () => {
      let text = "";
      const sock = net.connect(port, "127.0.0.1", () => sock.write(post("/v1/chat/completions", body, { Authorization: undefined })));
      sock.on("data", (d) => (text += d));
      sock.on("error", () => {});
      return { sock, done: new Promise((res) => sock.on("close", () => res(text))), text: () => text };
    });
    for (let i = 0; i < 500 && !streams.some((s) => (s.text().match(/"content":/g) ?? []).length > 5); i++)
      await new Promise((res) => setTimeout(res, 20));  // one stream is generating
    const exited = new Promise((res) => server.child.on("exit", (code, signal) => res({ code, signal })));
    const t0 = Date.now();
    server.child.kill("SIGTERM");
    const { code, signal } = await exited;
    assert.equal(signal, null);
    assert.equal(code, 0, server.log());
    assert.ok(Date.now() - t0 < 4000, `exit took ${Date.now() - t0} ms`);
    let finished = 0, refused = 0;
    for (const s of streams) {
      const text = await s.done;
      assert.match(text, /^HTTP\/1\.1 200/);
      // The chunked stream ends properly: [DONE] and the terminating zero-length chunk.
      assert.match(text, /data: \[DONE\]\n\n\r\n0\r\n\r\n$/, text.slice(-300));
      if (/"finish_reason":"length"/.test(text)) finished++;
      if (/shutting down/.test(text)) refused++;
    }
    assert.equal(finished, 1);
    assert.equal(refused, 3);
  });
});

describe("SIGTERM → tinyllm serve (stories260K)", () => {
  test("streams end with [DONE] and the process exits 0", async () => {
    const server = startServer(process.env.TINYLLM_BIN, ["serve", "--port", "0", "--max-context", "256", "--shutdown-timeout", "5"]);
    const port = Number(new URL(await server.url).port);
    // A first request compiles the kernels (seconds on a busy machine; a forward is not interruptible).
    const warm = await raw(port, post("/v1/completions", JSON.stringify({ prompt: "Once", max_tokens: 2 }), { Authorization: undefined }), { timeout: 60000 });
    assert.equal(warm.status, 200, warm.body);
    const body = JSON.stringify({ prompt: "Once upon a time", stream: true, max_tokens: 200, temperature: 0 });
    const streams = Array.from({ length: 2 }, () => {
      let text = "";
      const sock = net.connect(port, "127.0.0.1", () => sock.write(post("/v1/completions", body, { Authorization: undefined })));
      sock.on("data", (d) => (text += d));
      sock.on("error", () => {});
      return { done: new Promise((res) => sock.on("close", () => res(text))), text: () => text };
    });
    for (let i = 0; i < 500 && !streams.some((s) => s.text().includes("data: ")); i++) await new Promise((res) => setTimeout(res, 10));
    const exited = new Promise((res) => server.child.on("exit", (code, signal) => res({ code, signal })));
    server.child.kill("SIGTERM");
    assert.deepEqual(await exited, { code: 0, signal: null }, server.log());
    for (const s of streams) assert.match(await s.done, /data: \[DONE\]\n\n\r\n0\r\n\r\n$/);
  });
});
