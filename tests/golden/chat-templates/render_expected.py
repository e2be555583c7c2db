#!/usr/bin/env python3
"""Renders expected/<template>.<conversation>.txt (or .error) for the templates
here, with Python's jinja2 set up as Hugging Face transformers'
apply_chat_template sets it up, on the conversations of
../shared/fixtures/chat-templates/conversations.jsonl (its README has the
settings; this follows them).

    tests/golden/chat-templates/render_expected.py [SHARED_DIR]
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

here = os.path.dirname(os.path.abspath(__file__))
shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../../../../shared")
conversations = [json.loads(line) for line in open(os.path.join(shared, "fixtures/chat-templates/conversations.jsonl"),
                                                    encoding="utf-8") if line.strip()]

# bos_token / eos_token of each template's model, by the file name's start.
SPECIAL = [("Qwen", "", "<|im_end|>"), ("google", "<bos>", "<eos>"), ("microsoft", "<s>", "<|endoftext|>")]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime(2026, 12, 1, 9, 30, 0).strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

out_dir = os.path.join(here, "expected")
for file in sorted(os.listdir(os.path.join(here, "templates"))):
    name = file[: -len(".jinja")]
    bos, eos = next((b, e) for prefix, b, e in SPECIAL if name.startswith(prefix))
    template = env.from_string(open(os.path.join(here, "templates", file), encoding="utf-8").read())
    for c in conversations:
        context = {"messages": c["messages"], "add_generation_prompt": c.get("add_generation_prompt", True),
                   "bos_token": bos, "eos_token": eos}
        if "tools" in c:
            context["tools"] = c["tools"]
        stem = os.path.join(out_dir, f"{name}.{c['id']}")
        for old in (stem + ".txt", stem + ".error"):
            if os.path.exists(old):
                os.remove(old)
        try:
            text = template.render(**context)
            with open(stem + ".txt", "w", encoding="utf-8", newline="") as f:
                f.write(text)
        except Exception as e:  # the template refused the conversation: its message is the fixture
            with open(stem + ".error", "w", encoding="utf-8", newline="") as f:
                f.write(f"{type(e).__name__}: {e}")
print(f"jinja2 {jinja2.__version__}: rendered {len(os.listdir(out_dir))} files into {out_dir}")
