#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under fuzz/corpus/TARGET/ (small, real inputs).

Run from the repository with the git-forum binary built (cargo build), as
`python3 fuzz/seed.py [path/to/git-forum]`. It makes a throwaway repository for the pack
entries and the write-ahead log record; everything else is written out directly or copied
from the test fixtures. Rerunning it rewrites the same files (the pack and log seeds differ
only in the log's ids and times).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
FORUM = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "git-forum")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def git(cwd, *args, env=None):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env).stdout


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)

    # canonical_json: entry bodies as the ledger stores them, and the number forms Python reads.
    put("canonical_json", "entry", '{"actor":"planner","kind":"plan","payload":{"tasks":[{"id":"T1","needs":[]}]}}')
    put("canonical_json", "numbers", '[0,-0,1.0,1e400,-1.5E-7,123456789012345678901234567890,NaN,-Infinity]')
    put("canonical_json", "strings", '{"a":"\\u00e9\\n\\t\\"","b":"\\ud83d\\ude00","\\u0000":""}')
    put("canonical_json", "repeated_keys", '{"b":1,"a":2,"b":3}')
    put("canonical_json", "pretty", '{\n  "nested": [\n    {"x": [true, false, null]}\n  ]\n}\n')
    put("canonical_json", "lone_surrogate", '"\\ud800"')

    # hook_stdin: what git gives pre-push (local ref, local id, remote ref, remote id) and
    # pre-receive (old id, new id, ref).
    zero, a, b = "0" * 40, "a" * 40, "b" * 40
    put("hook_stdin", "pre_push", f"refs/heads/main {a} refs/heads/main {b}\nrefs/forum/ledgers/main {a} refs/forum/ledgers/main {zero}\n")
    put("hook_stdin", "pre_receive", f"{zero} {a} refs/forum/ledgers/main\n{a} {b} refs/heads/topic\n")
    put("hook_stdin", "deletion_no_newline", f"(delete) {zero} refs/forum/ledgers/old {a}")

    # trace: a trace of each format (Forum's four as JSON lists, OTLP/JSON and Claude Code
    # lines from the test fixtures).
    put("trace", "langsmith", json.dumps([
        {"id": "r1", "name": "AgentExecutor", "run_type": "chain", "inputs": {"q": "weather"}},
        {"id": "r2", "name": "ChatOpenAI", "run_type": "llm", "parent_run_id": "r1"}]))
    put("trace", "otel", json.dumps([
        {"name": "root", "span_id": "s1"}, {"name": "child", "span_id": "s2", "parent_span_id": "s1"}]))
    put("trace", "agentops", json.dumps([
        {"event_type": "llm", "agent": "a", "id": "e1"}, {"event_type": "tool", "id": "e2", "parent_id": "e1"}]))
    put("trace", "generic", json.dumps([
        {"actor": "a", "kind": "note", "payload": {"n": 1}, "id": 1}, {"actor": "b", "kind": "reply", "payload": 2, "parent": 1}]))
    flight = os.path.join(ROOT, "tests", "integration", "data", "flight")
    for name in ("otlp-collector.jsonl", "claude-code-session.jsonl"):
        with open(os.path.join(flight, name), "rb") as f:
            put("trace", name.replace(".jsonl", ""), f.read())
        with open(os.path.join(flight, name), "rb") as f:
            put("trace", name.replace(".jsonl", "-line"), f.readlines()[1])

    # mcp_frames: a session's first lines, a notification, a response, and refusals.
    put("mcp_frames", "session", "\n".join(json.dumps(m) for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ledger_status", "arguments": {}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
    ]) + "\n")
    put("mcp_frames", "refusals", '{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n[1]\n{"jsonrpc":"1.0","id":1,"method":"ping"}\nnot json\n\n{"jsonrpc":"2.0","id":9,"result":{}}\n')
    put("mcp_frames", "crlf_and_nan", '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ledger_append","arguments":{"payload":NaN}}}\r\n')

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
                   GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                   GIT_COMMITTER_EMAIL="t@t", GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
                   GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
        # pack: each undeltified entry of a small pack git wrote (a commit, a tree, blobs),
        # cut at the offsets its index gives; and the blobs' bytes for the round trip.
        repo = os.path.join(tmp, "r")
        git(tmp, "init", "-q", repo, env=env)
        for name, text in [("a.txt", "hello\n"), ("calc.py", "def add(a, b):\n    return a + b\n" * 20)]:
            with open(os.path.join(repo, name), "w") as f:
                f.write(text)
        git(repo, "add", ".", env=env)
        git(repo, "commit", "-q", "-m", "seed", env=env)
        git(repo, "repack", "-q", "-a", "-d", "--depth=0", env=env)
        pack_dir = os.path.join(repo, ".git", "objects", "pack")
        idx = [p for p in os.listdir(pack_dir) if p.endswith(".idx")][0]
        rows = git(pack_dir, "verify-pack", "-v", idx, env=env).decode().splitlines()
        with open(os.path.join(pack_dir, idx[:-4] + ".pack"), "rb") as f:
            pack = f.read()
        for row in rows:
            f = row.split()
            if len(f) >= 5 and len(f[0]) == 40 and f[1] in ("commit", "tree", "blob"):
                size_in_pack, offset = int(f[3]), int(f[4])
                put("pack", f"{f[1]}-{f[0][:8]}", pack[offset:offset + size_in_pack])
        # `W` first: the blobs go through the pack writer and back (see src/fuzzing.rs).
        put("pack", "blobs", b"Whello\n\xffdef add(a, b):\n    return a + b\n\xff")

        # wal: the record and the header a durable append wrote to the write-ahead log. The
        # first byte of a wal input picks the hash and the log format (0: SHA-1, format 2).
        ledger_repo = os.path.join(tmp, "l")
        git(tmp, "init", "-q", ledger_repo, env=env)
        subprocess.run([FORUM, "init"], cwd=ledger_repo, check=True, capture_output=True, env=env)
        for payload in ('{"n":1}', '{"text":"second","x":[1.5,NaN]}'):
            subprocess.run([FORUM, "append", "--actor", "a", "--kind", "note", "--payload", payload],
                           cwd=ledger_repo, check=True, capture_output=True, env=env)
        wal_dir = os.path.join(ledger_repo, ".git", "forum", "wal")
        log = open(os.path.join(wal_dir, sorted(os.listdir(wal_dir))[0]), "rb").read()
        put("wal", "header", b"\x00" + log[:128])
        at = 4096
        n = 0
        while at + 8 <= len(log):
            length, _crc = struct.unpack_from("<II", log, at)
            if length == 0 or at + 8 + length > len(log):
                break
            put("wal", f"record-{n}", b"\x00" + log[at + 8:at + 8 + length])
            at += 8 + length
            n += 1
        assert n > 0, "the append wrote no log record"


if __name__ == "__main__":
    main()
