// Starts a tinyllm server process (tinyllm_fake over the scripted model, or the real `tinyllm serve`)
// on a free port and returns its base URL once it prints "http://host:port".
import { spawn } from "node:child_process";

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
  const list = [{ name: "tinyllm_fake", command: process.env.TINYLLM_FAKE, args: ["serve", "--port", "0", "--ctx", "256", "--api-key", "test-key"] }];
  const real = process.env.TINYLLM_BIN;
  list.push({
    name: "tinyllm serve (stories260K)",
    command: real,
    args: ["serve", "--port", "0", "--max-context", "256", "--api-key", "test-key"],
  });
  return list;
}
