#!/usr/bin/env python3
"""Measures whether plans name real files of the repository, with and without the repository
as context (issue 22, point 3).

In a fresh 7-file repository, each request is submitted twice to a chat model (once with the
repository map, once with --no-repo-context), stopped after the planner's call
(--max-model-calls 1). For each plan it counts the tasks whose instruction or done_when names a
tracked file (its path, or its file name), and reads the planner's prompt tokens (the plan
entry's usage, as the server counted them) and the tokens of the request `context` entry (bytes
/ 4, as the context budget counts them).

    scripts/measure-plan-files.py [--url BASE] [--model NAME] [--bin PATH] [--runs N] [--only-repo]

BASE defaults to $LOCAL_LLM_URL (e.g. http://127.0.0.1:18080/v1); the binary to
target/debug/git-forum. Prints one line per run, then the totals. Writes only in a temporary
directory; nothing is started or stopped.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

FILES = {
    "README.md": "# tinycalc\n\nA small calculator for the command line: `tinycalc '2 + 3 * 4'`.\n"
    "The expression is tokenized, parsed into a tree, then evaluated.\n",
    "src/calc.py": "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    return a / b\n",
    "src/parser.py": "def tokenize(text):\n    return text.split()\n\n\ndef parse(tokens):\n"
    "    '''Builds the expression tree.'''\n    return tokens\n",
    "src/cli.py": "import sys\nfrom calc import add\n\n\ndef main(argv=sys.argv):\n"
    "    print(argv[1:])\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "docs/usage.md": "# Usage\n\nRun `tinycalc EXPRESSION`.\n",
    "Makefile": "lint:\n\tpython3 -m pyflakes src\n",
}

REQUESTS = [
    "Make divide refuse a zero divisor and add a test for it",
    "Add a --verbose option to the command line tool",
    "Document the parse function in the usage guide",
    "Fix the tokenizer so that it accepts negative numbers",
    "Add a make target that runs the tests",
]


def env_for(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=home,
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_SYSTEM="/dev/null",
        GIT_AUTHOR_NAME="m",
        GIT_AUTHOR_EMAIL="m@example.invalid",
        GIT_COMMITTER_NAME="m",
        GIT_COMMITTER_EMAIL="m@example.invalid",
    )
    return env


def names_a_file(text, paths):
    return any(p in text or os.path.basename(p) in text for p in paths)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=os.environ.get("LOCAL_LLM_URL", ""))
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "debug", "git-forum"))
    ap.add_argument("--runs", type=int, default=len(REQUESTS))
    ap.add_argument("--only-repo", action="store_true", help="skip the runs without repo context")
    a = ap.parse_args()
    if not a.url:
        sys.exit("measure-plan-files: give --url BASE or set LOCAL_LLM_URL")
    chat = a.url.rstrip("/") + "/chat/completions"
    forum = os.path.abspath(a.bin)
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        env = env_for(tmp)
        for path, text in FILES.items():
            full = os.path.join(repo, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        git = lambda *args: subprocess.run(["git", *args], cwd=repo, env=env, check=True,
                                           capture_output=True, text=True).stdout
        git("init", "-q", ".")
        git("add", "-A")
        git("commit", "-qm", "seven files")
        paths = git("ls-files").split()

        def forum_json(*args):
            out = subprocess.run([forum, *args, "--json"], cwd=repo, env=env,
                                 capture_output=True, text=True).stdout
            return json.loads(out)

        totals = {True: [0, 0, 0, 0, 0], False: [0, 0, 0, 0, 0]}  # plans, tasks, naming, prompt, ctx
        for request in REQUESTS[: a.runs]:
            for repo_ctx in ((True,) if a.only_repo else (True, False)):
                before = len(forum_json("log")) if git("for-each-ref", "refs/forum/ledgers") else 0
                args = [forum, "submit", "--quiet", "--chat-url", chat, "--model", a.model,
                        "--max-model-calls", "1"]
                if not repo_ctx:
                    args.append("--no-repo-context")
                t = time.time()
                subprocess.run([*args, request], cwd=repo, env=env, capture_output=True)
                took = time.time() - t
                new = [e for e in forum_json("log") if e["seq"] >= before]
                plan = next((e for e in new if e["kind"] == "plan"), None)
                ctx = next((e for e in new if e["kind"] == "context"), None)
                ctx_tokens = 0
                if ctx:
                    text = forum_json("show", str(ctx["seq"]), "--payload")["payload"]["context"]
                    ctx_tokens = (len(text.encode()) + 3) // 4
                if plan is None:
                    print(f"{'repo' if repo_ctx else 'none'}  {request!r}: no plan ({took:.0f} s)")
                    continue
                p = forum_json("show", str(plan["seq"]), "--payload")["payload"]
                tasks = p.get("tasks", [])
                naming = [t for t in tasks
                          if names_a_file(t.get("instruction", "") + " " + " ".join(map(str, t.get("done_when", []))), paths)]
                prompt = (p.get("usage") or {}).get("prompt_tokens", 0)
                tot = totals[repo_ctx]
                tot[0] += 1
                tot[1] += len(tasks)
                tot[2] += len(naming)
                tot[3] += prompt
                tot[4] += ctx_tokens
                print(f"{'repo' if repo_ctx else 'none'}  {request!r}: {len(naming)}/{len(tasks)} tasks name a file; "
                      f"planner prompt {prompt} tokens, context {ctx_tokens} tokens ({took:.0f} s)")
                for t in tasks:
                    print(f"      {t.get('id')}: {t.get('instruction', '')[:110]!r}")
        for repo_ctx in (True, False):
            plans, tasks, naming, prompt, ctx = totals[repo_ctx]
            avg = lambda x: x / plans if plans else 0
            print(f"{'with repo context   ' if repo_ctx else 'without repo context'}: {plans} plans, "
                  f"{naming}/{tasks} tasks name a tracked file, planner prompt {avg(prompt):.0f} tokens "
                  f"on average, request context {avg(ctx):.0f} tokens on average")


if __name__ == "__main__":
    main()
