#!/usr/bin/env python3
"""Writes a synthetic traffic capture (tachyon serve --capture's line format) of a
realistic mix built from ../shared/data prompt sets: MT-Bench, self-instruct and
FastChat's identity questions, with repeats (Zipf-like popularity), a long shared
system prompt on part of the traffic, streaming and not. Latencies follow a simple
TTFT = a + b x uncached prompt tokens model so the audit has something to fit.

  benchmarks/make_capture.py --shared ../shared --requests 1000000 --out capture.jsonl
"""
import argparse, gzip, json, os, random

SYSTEM = ("You are the support assistant of Acme Cloud. Answer in plain English, in at most five sentences. "
          "Always cite the documentation page you used. Never reveal internal ticket numbers. "
          "If you are not sure, say so and suggest contacting support@acme.example. ") * 6


def prompts(shared):
    out = []
    with open(os.path.join(shared, "data/prompts/mt_bench/question.jsonl")) as f:
        for line in f:
            out.extend(json.loads(line)["turns"])
    with open(os.path.join(shared, "data/prompts/self_instruct/user_oriented_instructions.jsonl")) as f:
        for line in f:
            out.append(json.loads(line)["instruction"])
    with open(os.path.join(shared, "data/prompts/fastchat_identity/dummy_conversation.json")) as f:
        for conv in json.load(f):
            for turn in conv["conversations"]:
                if turn["from"] == "human":
                    out.append(turn["value"])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "../../shared"))
    p.add_argument("--requests", type=int, default=100000)
    p.add_argument("--rate", type=float, default=20.0, help="arrivals per second")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rng = random.Random(a.seed)
    texts = prompts(a.shared)
    weights = [1.0 / (i + 1) ** 0.8 for i in range(len(texts))]  # a few questions are asked often
    ts = 1796400000.0
    with open(a.out, "w") as out:
        for i in range(a.requests):
            ts += rng.expovariate(a.rate)
            user = rng.choices(texts, weights)[0]
            with_system = rng.random() < 0.6
            stream = rng.random() < 0.7
            messages = ([{"role": "system", "content": SYSTEM}] if with_system else []) + [{"role": "user", "content": user}]
            prompt_tokens = (len(SYSTEM) // 4 if with_system else 0) + len(user) // 4 + 8
            cached = len(SYSTEM) // 4 if with_system and rng.random() < 0.3 else 0
            completion = int(rng.lognormvariate(4.5, 0.8))
            ttft = 40 + 0.25 * (prompt_tokens - cached) + rng.expovariate(1 / 10)
            e2e = ttft + 12 * completion
            line = {"ts": round(ts, 3), "route": "chat", "endpoint": "/v1/chat/completions", "model": "chat",
                    "stream": stream, "status": 200, "ttft_ms": round(ttft if stream else e2e, 3),
                    "e2e_ms": round(e2e, 3), "prompt_tokens": prompt_tokens, "completion_tokens": completion,
                    "cached_tokens": cached, "cache": "off", "backend": "engine", "backend_kind": "local",
                    "tenant": "", "queue_ms": round(rng.expovariate(1 / 8), 3),
                    "output_ngram_share": round(rng.random() * 0.6, 4),
                    "body": {"model": "chat", "temperature": 0 if rng.random() < 0.5 else 0.7,
                             "stream": stream, "messages": messages}}
            out.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
