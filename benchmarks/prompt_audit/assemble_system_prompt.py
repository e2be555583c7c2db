#!/usr/bin/env python3
"""Assembles a long system prompt from real instruction text, the way prompts
grow in production: several authors' sections pasted together, rules restated,
an example pasted twice, stray whitespace.

Sources (read in place from ../shared/data/prompts): self-instruct seed tasks
(instructions and their instances as worked examples) and MT-Bench questions
(as style rules). Inserted on purpose, deterministically (seed 7):
  - exact duplicates: 12 guideline items restated word for word in later sections
  - near duplicates: 8 guideline items restated with a different opening
  - contradictions: 3 imperative guideline items negated ("Do not ...") in a later section
  - a repeated example: 2 worked examples pasted again
  - whitespace: trailing spaces on every 9th line, runs of blank lines

  assemble_system_prompt.py OUT.txt [OUT.json]
OUT.json, when given, is a chat request with the prompt as its system message.
"""
import json
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "..", "..", "..", "shared", "data", "prompts")
rng = random.Random(7)

seed = [json.loads(l) for l in open(os.path.join(data, "self_instruct", "seed_tasks.jsonl"))]
mt = [json.loads(l) for l in open(os.path.join(data, "mt_bench", "question.jsonl"))]


def one_line(s):
    return " ".join(s.split())


guidelines = [one_line(t["instruction"]) for t in seed if len(t["instruction"].split()) >= 6][:90]
styles = [one_line(q["turns"][1]) for q in mt if len(q["turns"]) > 1 and len(q["turns"][1].split()) >= 6][:40]
examples = [t for t in seed if t["instances"] and t["instances"][0]["output"] and len(t["instances"][0]["output"]) < 400][:12]

out = []
out.append("# Role")
out.append("")
out.append("You are the assistant of a help desk that answers customers and staff. Read every section before you answer.")
out.append("")
out.append("## Tasks you handle")
out.append("")
for g in guidelines[:45]:
    out.append("- " + g)
out.append("")
out.append("## Answer style")
out.append("")
for s in styles[:20]:
    out.append("- " + s)
out.append("")
out.append("")
out.append("")
def worked_example(number, task):
    out.append("")
    out.append("Example %d:" % number)
    out.append("Input: " + one_line(task["instruction"] + " " + task["instances"][0]["input"]))
    out.append("Output: " + one_line(task["instances"][0]["output"]))


out.append("## Worked examples")
for i, t in enumerate(examples[:8]):
    worked_example(i + 1, t)
out.append("")
out.append("## More tasks (added by the second team)")
out.append("")
for g in guidelines[45:90]:
    out.append("- " + g)
duplicated = rng.sample(guidelines[:45], 12)
for g in duplicated:
    out.append("- " + g)
out.append("")
out.append("## Reminders")
out.append("")
openings = ["Remember to handle this: ", "Also, when asked: ", "In particular: ", "Note: "]
for k, g in enumerate(rng.sample(guidelines[:45], 8)):
    out.append("- " + openings[k % len(openings)] + g[0].lower() + g[1:])
for s in styles[20:40]:
    out.append("- " + s)
out.append("")
out.append("## Policy changes")
out.append("")
verbs = {"Write", "Generate", "Explain", "Suggest", "Make", "Give", "Find", "Create", "Describe", "Tell", "List",
         "Recommend", "Summarize", "Rewrite", "Add", "Use", "Answer", "Convert"}
negatable = [g for g in guidelines[:90] if g.split()[0] in verbs and "not" not in g.split() and "n't" not in g]
for g in rng.sample(negatable, 3):
    out.append("- Do not " + g[0].lower() + g[1:])
out.append("")
out.append("## Examples again (pasted from the old prompt)")
for i, t in enumerate(examples[2:4]):
    worked_example(i + 3, t)
out.append("")
out.append("")
for i in range(0, len(out), 9):
    if out[i]:
        out[i] += "   "
text = "\n".join(out) + "\n"

with open(sys.argv[1], "w") as f:
    f.write(text)
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as f:
        json.dump({"model": "chat", "messages": [{"role": "system", "content": text},
                                                  {"role": "user", "content": "Hello, who are you?"}]}, f)
