#!/usr/bin/env python3
"""Measures a running `tinyllm serve` (or any OpenAI-compatible server) the way its users feel it.

  scripts/bench_serve.py URL throughput --clients 1,4 [--tokens 64] [--rounds 3]
      aggregate decode tok/s of N clients streaming at once (completion tokens from `usage`), each round
      N requests started together; medians over rounds
  scripts/bench_serve.py URL ttft [--prompt-tokens 100] [--busy 3] [--rounds 5]
      time to first token of a prompt of about that many tokens on an idle server, then with `busy`
      other clients decoding long replies meanwhile; medians
  scripts/bench_serve.py URL soak [--clients 64] [--seconds 60] [--hang-up 0.33]
      clients in a loop for that long, a random share of them hanging up at a random moment; every
      completed reply must equal the same request's solo reply, and afterwards /metrics must show no
      running sequence and no KV block held

Random-weight models emit tokens that decode to empty text: every request biases one token that
decodes to visible text (--visible-token, default: found with /detokenize) so streams carry text.
Python standard library only.
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


class Server:
    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80

    def post(self, path, body, timeout=600):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError(f"{path}: {r.status} {data[:200]!r}")
        return json.loads(data)

    def get(self, path):
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        c.request("GET", path)
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        return data

    def stream(self, body, hang_up_after=None):
        """Streams a completion: (text, completion tokens, seconds to the first text, seconds in all).
        hang_up_after: close the connection after that many seconds (returns None)."""
        body = dict(body, stream=True, stream_options={"include_usage": True})
        t0 = time.monotonic()
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"stream: {r.status} {r.read()[:200]!r}")
        text, n_tokens, first = "", 0, None
        while True:
            if hang_up_after is not None and time.monotonic() - t0 > hang_up_after:
                c.close()
                return None
            line = r.readline()
            if not line:
                break
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            for choice in event.get("choices", []):
                if choice.get("text"):
                    if first is None:
                        first = time.monotonic() - t0
                    text += choice["text"]
            if event.get("usage"):
                n_tokens = event["usage"]["completion_tokens"]
        c.close()
        return text, n_tokens, first, time.monotonic() - t0


def visible_token(server):
    for tid in range(100, 5000):
        text = server.post("/detokenize", {"tokens": [tid]})["content"]
        if text.strip() and text.isprintable():
            return tid
    raise RuntimeError("no token with visible text found")


def request(i, tokens, token, prompt_words=8, temperature=0.0):
    words = ["alpha", "river", "stone", "cloud", "maple", "ember", "north", "quiet", "lumen", "cedar"]
    rng = random.Random(i)
    prompt = " ".join(rng.choice(words) for _ in range(prompt_words))
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": temperature, "seed": i, "logit_bias": {str(token): 8.0}}
    return body


def run_together(fn, n):
    out, threads = [None] * n, []
    for i in range(n):
        threads.append(threading.Thread(target=lambda i=i: out.__setitem__(i, fn(i))))
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, time.monotonic() - t0


def throughput(server, args, token):
    rows = []
    for n in [int(x) for x in args.clients.split(",")]:
        rates = []
        for rnd in range(args.rounds + 1):  # round 0 warms up
            res, wall = run_together(lambda i: server.stream(request(1000 * rnd + i, args.tokens, token)), n)
            if rnd:
                rates.append(sum(r[1] for r in res) / wall)
        rows.append({"clients": n, "aggregate_tok_s": statistics.median(rates), "rounds": [round(r, 1) for r in rates]})
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["aggregate_tok_s"]
    for r in rows:
        print(f"{r['clients']} clients: {r['aggregate_tok_s']:.1f} tok/s aggregate ({r['aggregate_tok_s'] / base:.2f}x of {rows[0]['clients']})")


def ttft(server, args, token):
    def probe(i):
        return server.stream(request(i, 4, token, prompt_words=args.prompt_tokens))[2]

    idle = [probe(10 + r) for r in range(args.rounds)]
    busy = []
    stop = threading.Event()

    def background(i):
        while not stop.is_set():
            server.stream(request(5000 + i * 97 + int(time.monotonic()), 200, token))

    threads = [threading.Thread(target=background, args=(i,)) for i in range(args.busy)]
    for t in threads:
        t.start()
    time.sleep(2)  # the others are decoding
    for r in range(args.rounds):
        busy.append(probe(20 + r))
        time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    mi, mb = statistics.median(idle), statistics.median(busy)
    print(json.dumps({"prompt_words": args.prompt_tokens, "busy_clients": args.busy, "idle_ttft_s": [round(x, 4) for x in idle],
                      "busy_ttft_s": [round(x, 4) for x in busy]}))
    print(f"TTFT idle {mi * 1000:.1f} ms, with {args.busy} others decoding {mb * 1000:.1f} ms ({mb / mi:.2f}x)")


def soak(server, args, token):
    kinds = 16  # distinct requests; each one's solo reply is the reference
    bodies = [dict(request(i, 24 + 8 * (i % 4), token), temperature=0.0 if i % 2 == 0 else 0.8) for i in range(kinds)]
    solo = [server.stream(b)[0] for b in bodies]
    deadline = time.monotonic() + args.seconds
    stats = {"completed": 0, "hung_up": 0, "mismatched": 0, "errors": 0}
    lock = threading.Lock()

    def client(i):
        rng = random.Random(i)
        while time.monotonic() < deadline:
            k = rng.randrange(kinds)
            hang = rng.random() < args.hang_up
            try:
                r = server.stream(bodies[k], hang_up_after=rng.uniform(0.0, 2.0) if hang else None)
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    stats["errors"] += 1
                print(f"client {i}: {e}", file=sys.stderr)
                continue
            with lock:
                if r is None:
                    stats["hung_up"] += 1
                else:
                    stats["completed"] += 1
                    if r[0] != solo[k]:
                        stats["mismatched"] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = {}
    for _ in range(100):
        metrics = dict(line.split(" ", 1) for line in server.get("/metrics").splitlines() if line and not line.startswith("#"))
        held = {k: float(metrics[k]) for k in ("tinyllm_sequences_running", "tinyllm_sequences_waiting", "tinyllm_kv_blocks_used",
                                               "tinyllm_requests_processing")}
        if not any(held.values()):
            break
        time.sleep(0.1)
    print(json.dumps({**stats, "after": held}))
    ok = stats["mismatched"] == 0 and stats["errors"] == 0 and not any(held.values()) and stats["completed"] > 0
    print("soak: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("mode", choices=["throughput", "ttft", "soak"])
    ap.add_argument("--clients", default=None)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=100)
    ap.add_argument("--busy", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--hang-up", type=float, default=1 / 3)
    ap.add_argument("--visible-token", type=int, default=None)
    args = ap.parse_args()
    server = Server(args.url)
    token = args.visible_token if args.visible_token is not None else visible_token(server)
    if args.mode == "throughput":
        args.clients = args.clients or "1,4"
        throughput(server, args, token)
    elif args.mode == "ttft":
        ttft(server, args, token)
    else:
        args.clients = int(args.clients or 64)
        return soak(server, args, token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
