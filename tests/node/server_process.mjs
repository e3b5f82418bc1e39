// Starts a tinyllm server process (tinyllm_fake over the scripted model, or the real `tinyllm serve`)
// on a free port and returns its base URL once it prints "http://host:port".
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";

export function startServer(command, args) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const url = new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`${command} did not start in time:\n${stderr}`)), 60000);
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/http:\/\/[\d.]+:\d+/);
      if (m) { clearTimeout(timer); resolve(m[0]); }
    });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`${command} exited with ${code}:\n${stderr}`)); });
  });
  return { child, url, stop: () => child.kill("SIGTERM"), log: () => stderr };
}

// The servers the client tests run against: the scripted fake and the real `tinyllm serve` on the built-in model.
export function servers() {
  const list = [{ name: "tinyllm_fake", command: process.env.TINYLLM_FAKE, args: ["serve", "--port", "0", "--ctx", "1024", "--api-key", "test-key"] }];
  const real = process.env.TINYLLM_BIN;
  list.push({
    name: "tinyllm serve (stories260K)",
    command: real,
    args: ["serve", "--port", "0", "--max-context", "256", "--api-key", "test-key"],
  });
  return list;
}

// A random-weight qwen3 (F32) served with Qwen3's own chat template (tools, thinking) and last-token
// pooling for embeddings: the real engine behind the tool and embedding routes. Needs ../shared.
export function qwen3Server() {
  const shared = process.env.TINYLLM_SHARED;
  const model = `${shared}/models/random-qwen3-f32.gguf`;
  const template = `${shared}/golden/templates/templates/Qwen-Qwen3-0.6B.jinja`;
  if (!shared || !existsSync(model) || !existsSync(template)) {
    if (process.env.TINYLLM_REQUIRE_SHARED && process.env.TINYLLM_REQUIRE_SHARED !== "0")
      throw new Error(`../shared is required (TINYLLM_REQUIRE_SHARED) but ${model} is absent`);
    console.warn(`SKIPPED: reference data ../shared is absent (${shared}); the random-qwen3 server is not tested`);
    return null;
  }
  return {
    name: "tinyllm serve (random qwen3, Qwen3 template)",
    command: process.env.TINYLLM_BIN,
    args: ["serve", "--port", "0", "--model", model, "--chat-template", template, "--pooling", "last",
           "--max-context", "1024", "--api-key", "test-key"],
  };
}

// The fake, the built-in model and (with ../shared) the random qwen3.
export function apiServers() {
  return [...servers(), qwen3Server()].filter(Boolean);
}

export const isFake = (target) => target.name === "tinyllm_fake";
export const isQwen3 = (target) => target.name.includes("qwen3");
