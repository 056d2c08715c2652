#!/usr/bin/python3
"""Render the chat-template conformance fixtures with Python's jinja2.

tests/test_chat.c renders every (template, conversation) pair listed in
tests/data/chat/manifest.json with our interpreter and compares the bytes
with what this script wrote. The reference is jinja2 configured exactly as
transformers' apply_chat_template configures it:

  - ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[<generation tag>, jinja2.ext.loopcontrols])
  - filter tojson(x, ensure_ascii=False, indent=None, separators=None,
    sort_keys=False) = json.dumps(...) with those arguments
  - globals raise_exception(msg) (raises TemplateError) and
    strftime_now(fmt) = datetime.now().strftime(fmt), with "now" fixed to
    2026-01-15 00:00:00 so the fixtures do not change by the day
  - render(messages=..., tools=<list or None>, documents=None,
    add_generation_prompt=<bool>, **special tokens, **other keys)

Run with Debian's Python and jinja2 (apt-get install python3-jinja2):

    /usr/bin/python3 scripts/gen_chat_fixtures.py

Inputs: tests/data/chat/templates/*.jinja (see the README there for where
each came from). Outputs: tests/data/chat/cases/*.json (the conversations),
tests/data/chat/expected/<template>/<case>.txt (or .err when Python raised),
and tests/data/chat/manifest.json.
"""
import json
import os
import shutil
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "tests", "data", "chat")
NOW = datetime(2026, 1, 15, 0, 0, 0)

# name -> (family shown in the docs, template file, bos_token, eos_token).
# Tokens are those of the model's tokenizer config; None means the
# tokenizer has none, so transformers does not pass the variable at all.
TEMPLATES = [
    ("qwen2.5-instruct", "Qwen2.5", None, "<|im_end|>"),
    ("qwen3", "Qwen3", None, "<|im_end|>"),
    ("qwq-32b", "Qwen3 (QwQ)", None, "<|im_end|>"),
    ("qwen3-coder", "Qwen3 (Coder)", None, "<|im_end|>"),
    ("qwen3.5", "Qwen3.5", None, "<|im_end|>"),
    ("llama-2-chat", "Llama 2", "<s>", "</s>"),
    ("llama-3-instruct", "Llama 3", "<|begin_of_text|>", "<|eot_id|>"),
    ("llama-3.1-instruct", "Llama 3.1", "<|begin_of_text|>", "<|eot_id|>"),
    ("llama-3.2-instruct", "Llama 3.2", "<|begin_of_text|>", "<|eot_id|>"),
    ("mistral-nemo", "Mistral (Nemo)", "<s>", "</s>"),
    ("mistral-small-3.2", "Mistral (Small 3.2)", "<s>", "</s>"),
    ("devstral-small", "Mistral (Devstral)", "<s>", "</s>"),
    ("gemma-1", "Gemma", "<bos>", "<eos>"),
    ("gemma-2", "Gemma 2", "<bos>", "<eos>"),
    ("gemma-3", "Gemma 3", "<bos>", "<eos>"),
    ("gemma-4", "Gemma 4", "<bos>", "<eos>"),
    ("phi-3", "Phi-3", "<s>", "<|endoftext|>"),
    ("phi-3.5-mini", "Phi-3.5", "<s>", "<|endoftext|>"),
    ("phi-4", "Phi-4", "<|endoftext|>", "<|im_end|>"),
    ("smollm3", "SmolLM3", None, "<|im_end|>"),
    ("deepseek-r1-distill-qwen", "DeepSeek R1 (distill)", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("deepseek-v3", "DeepSeek V3", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("deepseek-v3.1", "DeepSeek V3.1", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("command-r", "Command-R", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("command-r-plus-tool-use", "Command-R+ (tool use)", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("command-r7b-tool-use", "Command R7B (tool use)", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("glm-4-chat", "GLM-4", None, "<|endoftext|>"),
    ("glm-4.5", "GLM-4.5", None, "<|endoftext|>"),
    ("glm-4.6", "GLM-4.6", None, "<|endoftext|>"),
    ("gpt-oss", "gpt-oss", "<|startoftext|>", "<|return|>"),
    ("granite-3.3", "Granite 3.3", "<|end_of_text|>", "<|end_of_text|>"),
    ("granite-4.0", "Granite 4.0", "<|end_of_text|>", "<|end_of_text|>"),
    ("hermes-3-tool-use", "Hermes 3 (tool use)", "<|begin_of_text|>", "<|im_end|>"),
    ("functionary-v3.2", "Functionary v3.2", "<|begin_of_text|>", "<|eot_id|>"),
    ("kimi-k2", "Kimi K2", "[BOS]", "[EOS]"),
    ("nemotron-nano-v2", "Nemotron Nano v2", "<s>", "</s>"),
    ("seed-oss", "Seed-OSS", "<seed:bos>", "<seed:eos>"),
    ("apertus", "Apertus", "<s>", "</s>"),
    ("minimax-m2", "MiniMax-M2", "]~!b[", "[e~["),
    ("lfm2", "LFM2", "<|startoftext|>", "<|im_end|>"),
]

SYSTEM = "You are a helpful assistant."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
]


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CASES = {
    "system_user": {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        "add_generation_prompt": True,
    },
    "user_only": {
        "messages": [{"role": "user", "content": "Hello!"}],
        "add_generation_prompt": True,
    },
    "multi_turn": {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
        ],
        "add_generation_prompt": True,
    },
    "complete_no_gen": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "  4  "},
        ],
        "add_generation_prompt": False,
    },
    "tools_available": {
        "messages": [{"role": "user", "content": "What's the weather in Tokyo?"}],
        "tools": TOOLS,
        "add_generation_prompt": True,
    },
    "tool_calls": {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What's the weather in Paris, and what is 2 + 3?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("call00001", "get_weather", {"city": "Paris", "unit": "celsius"}),
                    call("call00002", "add", {"a": 2, "b": 3.5}),
                ],
            },
            {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
             "content": "{\"temperature\": 18, \"unit\": \"celsius\"}"},
            {"role": "tool", "tool_call_id": "call00002", "name": "add", "content": "5.5"},
        ],
        "tools": TOOLS,
        "add_generation_prompt": True,
    },
    "tool_calls_string_args": {
        "messages": [
            {"role": "user", "content": "Add 40 and 2."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("call00003", "add", "{\"a\": 40, \"b\": 2}")],
            },
            {"role": "tool", "tool_call_id": "call00003", "name": "add", "content": "42"},
            {"role": "assistant", "content": "40 + 2 = 42."},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": TOOLS,
        "add_generation_prompt": True,
    },
    "thinking_off": {
        "messages": [{"role": "user", "content": "Solve 12*12."}],
        "add_generation_prompt": True,
        "enable_thinking": False,
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "Why is the sky blue?"},
            {
                "role": "assistant",
                "content": "<think>\nRayleigh scattering favours short wavelengths.\n</think>\n\nBecause of Rayleigh scattering.",
                "reasoning_content": "Rayleigh scattering favours short wavelengths.",
                "thinking": "Rayleigh scattering favours short wavelengths.",
            },
            {"role": "user", "content": "And why are sunsets red?"},
        ],
        "add_generation_prompt": True,
        "enable_thinking": True,
    },
    "unicode": {
        "messages": [
            {"role": "system", "content": "Réponds en français. 日本語もOK。"},
            {"role": "user", "content": "Привет 👋 — «quotes» \"double\" 'single' back\\slash\ttab\nnew line\u2028sep, zero\u200bwidth, é"},
            {"role": "assistant", "content": "D'accord ✓"},
            {"role": "user", "content": "Ñandú 🐦 ‘ok’"},
        ],
        "add_generation_prompt": True,
    },
    "documents": {
        "messages": [{"role": "user", "content": "Where is the Eiffel Tower?"}],
        "documents": [
            {"title": "Paris", "text": "The Eiffel Tower is in Paris, France."},
            {"title": "Tower", "text": "It is 330 m tall."},
        ],
        "add_generation_prompt": True,
    },
    "cohere_tools": {
        # tools in the Cohere format the Command-R tool-use template expects
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Get the weather for a city.",
                "parameter_definitions": {
                    "city": {"description": "The city", "type": "str", "required": True},
                    "days": {"description": "Days ahead", "type": "int", "required": False},
                },
            }
        ],
        "add_generation_prompt": True,
    },
    "content_parts": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "text", "text": "Be brief."}]},
        ],
        "add_generation_prompt": True,
    },
}


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %} tag: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def context(case, bos, eos):
    """The keyword arguments apply_chat_template passes to render()."""
    ctx = dict(case)
    ctx.setdefault("tools", None)
    ctx.setdefault("documents", None)
    ctx.setdefault("add_generation_prompt", False)
    if bos is not None:
        ctx.setdefault("bos_token", bos)
    if eos is not None:
        ctx.setdefault("eos_token", eos)
    return ctx


def main():
    env = make_env()
    cases_dir = os.path.join(DATA, "cases")
    exp_dir = os.path.join(DATA, "expected")
    os.makedirs(cases_dir, exist_ok=True)
    shutil.rmtree(exp_dir, ignore_errors=True)
    os.makedirs(exp_dir)
    for name, case in CASES.items():
        with open(os.path.join(cases_dir, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(case, f, ensure_ascii=False, indent=1)
            f.write("\n")
    manifest = {"now": NOW.strftime("%Y-%m-%dT%H:%M:%S"), "jinja2": jinja2.__version__, "templates": []}
    for name, family, bos, eos in TEMPLATES:
        with open(os.path.join(DATA, "templates", name + ".jinja"), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        entry = {"name": name, "family": family, "template": "templates/%s.jinja" % name,
                 "bos_token": bos, "eos_token": eos, "cases": []}
        os.makedirs(os.path.join(exp_dir, name))
        for cname in CASES:
            # read the case back from its file, so Python renders exactly what C reads
            with open(os.path.join(cases_dir, cname + ".json"), encoding="utf-8") as f:
                case = json.load(f)
            item = {"case": cname}
            try:
                out = tmpl.render(**context(case, bos, eos))
                path = "expected/%s/%s.txt" % (name, cname)
                with open(os.path.join(DATA, path), "w", encoding="utf-8", newline="") as f:
                    f.write(out)
                item.update(result="ok", expected=path)
            except jinja2.exceptions.TemplateError as e:
                # raise_exception raises exactly TemplateError; jinja2's own
                # errors are subclasses (UndefinedError, TemplateSyntaxError)
                kind = "raise" if type(e) is jinja2.exceptions.TemplateError else "error"
                item.update(result=kind, message="%s: %s" % (type(e).__name__, e))
            except Exception as e:  # TypeError and friends from Python itself
                item.update(result="error", message="%s: %s" % (type(e).__name__, e))
            entry["cases"].append(item)
        manifest["templates"].append(entry)
        ok = sum(c["result"] == "ok" for c in entry["cases"])
        print("%-26s %2d/%d rendered" % (name, ok, len(entry["cases"])), file=sys.stderr)
    with open(os.path.join(DATA, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
