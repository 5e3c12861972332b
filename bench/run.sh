#!/bin/sh
# Reproduces every figure in docs/PERFORMANCE.md. Needs hyperfine
# (apt-get install -y hyperfine) and GNU time (/usr/bin/time).
# Usage: bench/run.sh            (prints a table of min / median per benchmark)
#        bench/run.sh targets    (only the execution-target round trips)
#        bench/run.sh protocols  (only the plain answer through each wire protocol)
#        bench/run.sh discovery  (only the local-server probe with nothing listening)
#        bench/run.sh realserver (only the plain answer and the tool loop against
#                                 llama.cpp's llama-server, buddy's wall time
#                                 next to the server's own timings; needs
#                                 scripts/real-server to have built it)
#        bench/run.sh compare OLD_BUDDY
#                                (--version, plain exec, per-iteration overhead
#                                 and peak RSS of this tree's buddy and of
#                                 OLD_BUDDY, another build, in alternating
#                                 rounds of the same run)
#        bench/run.sh serve [ARGS]
#                                (buddy serve under load: 100 sessions streaming
#                                 1,000 chunks at once, 20 runs summed up, RSS
#                                 per idle session; ARGS go to benches/serve.rs,
#                                 e.g. --pace-ms 10, or --buddy OLD --buddy NEW
#                                 to compare two builds in alternated runs)
set -eu
ONLY=${1:-}
if [ "$ONLY" = serve ]; then
    shift
    cd "$(dirname "$0")/.."
    echo "machine: $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%d)"
    exec cargo bench --quiet --bench serve -- "$@"
fi
OLD_BUDDY=
if [ "$ONLY" = compare ]; then
    OLD_BUDDY=$(realpath "${2:?usage: bench/run.sh compare OLD_BUDDY_BINARY}")
    [ -x "$OLD_BUDDY" ] || { echo "not an executable: $OLD_BUDDY" >&2; exit 2; }
fi
cd "$(dirname "$0")/.."
OLDPWD_REPO=$PWD
REAL_HOME=$HOME
# Separately, as a user builds it: together with an example, buddy would get
# the dev-dependencies' features, other symbol hashes, and so less of the
# start-up layout of build/startup.ld (scripts/startup-order).
# BENCH_NO_BUILD=1 with CARGO_TARGET_DIR=DIR times DIR/release/buddy and
# DIR/release/examples/fake_provider as they are (no cargo run while timing).
if [ -z "${BENCH_NO_BUILD:-}" ]; then
    cargo build --release --quiet --bin buddy
    cargo build --release --quiet --example fake_provider
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
BUDDY="$TARGET_DIR/release/buddy"
FAKE="$TARGET_DIR/release/examples/fake_provider"
WORK=$(mktemp -d)
trap 'kill $(cat "$WORK"/*.pid 2>/dev/null) 2>/dev/null || true; TMUX_TMPDIR="$WORK/tmux" tmux kill-server 2>/dev/null || true; rm -rf "$WORK"' EXIT
# Session store figures (library level); it also leaves 201 sessions, one of
# 5,000 messages (~20 MB), in $WORK/sessions for timing the binary below.
# Run before HOME changes, since cargo finds its toolchain through HOME.
if [ -z "$ONLY" ]; then
cargo bench --quiet --bench sessions -- --keep "$WORK/sessions" > "$WORK/sessions.txt" 2>/dev/null
# The checkpoint of a turn that touches 100 files (library level).
cargo bench --quiet --bench checkpoint > "$WORK/checkpoint.txt" 2>/dev/null
# A sub-agent's own cost beyond its model call (library level).
cargo bench --quiet --bench subagents > "$WORK/subagents.txt" 2>/dev/null
fi
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" NO_COLOR=1
mkdir -p "$XDG_CONFIG_HOME/buddy"
# An existing global config keeps buddy from writing one during the runs.
cp buddy.toml.example "$XDG_CONFIG_HOME/buddy/buddy.toml"

# start_fake NAME SCRIPT_JSON: a repeating fake provider; sets $URL.
start_fake() {
    printf '%s' "$2" > "$WORK/$1.json"
    "$FAKE" --script "$WORK/$1.json" --repeat > "$WORK/$1.url" &
    echo $! > "$WORK/$1.pid"
    while [ ! -s "$WORK/$1.url" ]; do sleep 0.05; done
    URL=$(head -n1 "$WORK/$1.url")
}

# config DIR URL: a working directory whose buddy.toml points at URL.
config() {
    mkdir -p "$1"
    cat > "$1/buddy.toml" <<TOML
[agent]
model = "fake"
max_iterations = 25
[models.fake]
api_base_url = "$URL"
model = "fake-model"
[tools]
shell_confirm = false
TOML
    # The bench stands in for the user's own config: trusted, so its
    # shell_confirm applies (an old binary without `trust` needs nothing).
    "$BUDDY" trust "$1/buddy.toml" > /dev/null 2>&1 || true
}

# stats LABEL JSON: min and median from a hyperfine export, in ms.
stats() {
    python3 - "$1" "$2" <<'PY'
import json, statistics, sys
label, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))["results"][0]
t = sorted(r["times"])
print(f"{label:<44} min {min(t)*1000:8.2f} ms   median {statistics.median(t)*1000:8.2f} ms   ({len(t)} runs)")
PY
}

# rss LABEL N CMD...: min and median peak RSS over N runs, in MiB.
rss() {
    label=$1; n=$2; shift 2
    : > "$WORK/rss"
    i=0
    while [ $i -lt "$n" ]; do
        /usr/bin/time -f %M -o "$WORK/rss.one" "$@" > /dev/null 2>&1
        cat "$WORK/rss.one" >> "$WORK/rss"
        i=$((i + 1))
    done
    python3 - "$label" "$WORK/rss" <<'PY'
import statistics, sys
v = sorted(int(x) / 1024 for x in open(sys.argv[2]).read().split())
print(f"{sys.argv[1]:<44} min {min(v):8.2f} MiB  median {statistics.median(v):8.2f} MiB  ({len(v)} runs)")
PY
}

echo "machine: $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%d)"

# Old against new: the same fake provider, HOME and buddy.toml for both. Each
# measurement runs in ROUNDS rounds; a round times both binaries back to back,
# the first one alternating, so drift in the machine's load falls on both. The
# per-round samples are pooled before taking min and median.
if [ "$ONLY" = compare ]; then
    ROUNDS=10
    echo "old: $OLD_BUDDY ($("$OLD_BUDDY" --version))"
    echo "new: $BUDDY ($("$BUDDY" --version))"
    # Both are timed as fresh copies written the same way: the same bytes
    # written by the linker and by cp were 10-15 % apart on a plain exec
    # here (the page cache holds them in different folio sizes).
    cp "$OLD_BUDDY" "$WORK/old-buddy"
    cp "$BUDDY" "$WORK/new-buddy"
    OLD_BUDDY="$WORK/old-buddy" BUDDY="$WORK/new-buddy"
    start_fake plain '[{"text":"hello from the fake model"}]'
    config "$WORK/plain"
    calls=$(python3 -c 'import json; print(json.dumps([{"tool_calls":[{"id":f"c{i}","name":"run_shell","arguments":json.dumps({"command":"true"})}]} for i in range(20)]+[{"text":"done"}]))')
    start_fake loop "$calls"
    config "$WORK/loop"
    # rounds NAME DIR WARMUP RUNS ARGS: ROUNDS x RUNS timings of `BIN ARGS` in
    # DIR for each binary, into $WORK/NAME-<round>.json.
    rounds() {
        name=$1; dir=$2; warmup=$3; runs=$4; shift 4
        r=0
        while [ $r -lt $ROUNDS ]; do
            if [ $((r % 2)) = 0 ]; then first=$OLD_BUDDY; second=$BUDDY; else first=$BUDDY; second=$OLD_BUDDY; fi
            # hyperfine's outlier warnings (stderr) are shown only if it fails.
            (cd "$dir" && hyperfine -N --warmup "$warmup" --runs "$runs" --export-json "$WORK/$name-$r.json" \
                "$first $*" "$second $*" > /dev/null 2> "$WORK/hyperfine.err") || { cat "$WORK/hyperfine.err" >&2; exit 1; }
            hyperfine -N --warmup 10 --runs 30 --export-json "$WORK/child-$name-$r.json" "sh -c true" > /dev/null 2>&1
            r=$((r + 1))
        done
    }
    rounds version "$WORK/plain" 20 100 --version
    rounds plain "$WORK/plain" 10 50 exec hi
    rounds loop "$WORK/loop" 1 10 exec loop
    python3 - "$WORK" "$OLD_BUDDY" "$BUDDY" <<'PY'
import glob, json, statistics, sys
work, old, new = sys.argv[1:4]
def times(name, binary):
    t = []
    for p in glob.glob(f"{work}/{name}-*.json"):
        for r in json.load(open(p))["results"]:
            if binary is None or r["command"].split()[0] == binary:
                t += r["times"]
    return sorted(t)
child = times("child-*", None)
fig = {}
for label, name in (("buddy --version", "version"), ("buddy exec (plain answer)", "plain"),
                    ("buddy exec (20 x run_shell true)", "loop")):
    for tag, b in (("old", old), ("new", new)):
        t = times(name, b)
        fig[name, tag] = (min(t), statistics.median(t))
        print(f"{tag + ' ' + label:<44} min {min(t)*1000:8.2f} ms   median {statistics.median(t)*1000:8.2f} ms   ({len(t)} runs)")
print(f"{'sh -c true (the child alone)':<44} min {min(child)*1000:8.2f} ms   median {statistics.median(child)*1000:8.2f} ms   ({len(child)} runs)")
ch = (min(child), statistics.median(child))
for tag in ("old", "new"):
    per = [(fig["loop", tag][i] - fig["plain", tag][i] - 20 * ch[i]) / 20 * 1000 for i in (0, 1)]
    print(f"{tag + ' buddy time per tool iteration':<44} min {per[0]:8.2f} ms   median {per[1]:8.2f} ms   beyond the child process")
for name in ("version", "plain", "loop"):
    d = [(fig[name, "new"][i] / fig[name, "old"][i] - 1) * 100 for i in (0, 1)]
    print(f"{'new vs old, ' + name:<44} min {d[0]:+7.1f} %    median {d[1]:+7.1f} %")
PY
    cd "$WORK/plain"
    rss "old buddy exec peak RSS (plain answer)" 30 "$OLD_BUDDY" exec hi
    rss "new buddy exec peak RSS (plain answer)" 30 "$BUDDY" exec hi
    exit 0
fi

if [ -z "$ONLY" ]; then
hyperfine -N --warmup 50 --runs 1000 --export-json "$WORK/version.json" "$BUDDY --version" > /dev/null
stats "buddy --version" "$WORK/version.json"
fi

start_fake plain '[{"text":"hello from the fake model"}]'
config "$WORK/plain" 
cd "$WORK/plain"
if [ -z "$ONLY" ]; then
hyperfine -N --warmup 20 --runs 300 --export-json "$WORK/plain.json" "$BUDDY exec hi" > /dev/null
stats "buddy exec (plain answer)" "$WORK/plain.json"
rss "buddy exec peak RSS (plain answer)" 50 "$BUDDY" exec hi
fi
cd - > /dev/null

# 20 model calls asking for run_shell "true", then an answer.
calls=$(python3 -c 'import json; print(json.dumps([{"tool_calls":[{"id":f"c{i}","name":"run_shell","arguments":json.dumps({"command":"true"})}]} for i in range(20)]+[{"text":"done"}]))')
start_fake loop "$calls"
config "$WORK/loop"
cd "$WORK/loop"
if [ -z "$ONLY" ]; then
hyperfine -N --warmup 3 --runs 40 --export-json "$WORK/loop.json" "$BUDDY exec loop" > /dev/null
stats "buddy exec (20 x run_shell true)" "$WORK/loop.json"
fi
cd - > /dev/null
if [ -z "$ONLY" ]; then
hyperfine -N --warmup 20 --runs 300 --export-json "$WORK/child.json" "sh -c true" > /dev/null
stats "sh -c true (the child alone)" "$WORK/child.json"
python3 - "$WORK/plain.json" "$WORK/loop.json" "$WORK/child.json" <<'PY'
import json, statistics, sys
med = lambda p: statistics.median(json.load(open(p))["results"][0]["times"])
mn = lambda p: min(json.load(open(p))["results"][0]["times"])
plain, loop, child = sys.argv[1:4]
for name, f in (("min", mn), ("median", med)):
    per = (f(loop) - f(plain) - 20 * f(child)) / 20 * 1000
    print(f"{'buddy time per tool iteration (' + name + ')':<44} {per:8.2f} ms beyond the child process")
PY

fi
if [ -z "$ONLY" ]; then
big=$(python3 -c 'import json; print(json.dumps([{"tool_calls":[{"id":"big","name":"run_shell","arguments":json.dumps({"command":"head -c 200000000 /dev/zero | tr \"\\\\0\" a"})}]},{"text":"done"}]))')
start_fake big "$big"
config "$WORK/big"
cd "$WORK/big"
rss "buddy exec peak RSS (200 MB tool output)" 5 "$BUDDY" exec big
hyperfine -N --warmup 1 --runs 5 --export-json "$WORK/big.json" "$BUDDY exec big" > /dev/null
stats "buddy exec (200 MB tool output)" "$WORK/big.json"
cd - > /dev/null

# Sessions: the library-level figures measured at the start, then the binary on
# the same files.
cat "$WORK/sessions.txt"
cat "$WORK/checkpoint.txt"
cat "$WORK/subagents.txt"
start_fake resume '[{"text":"resumed"}]'
config "$WORK/sessions"
cd "$WORK/sessions"
hyperfine -N --warmup 10 --runs 100 --export-json "$WORK/list.json" "$BUDDY sessions" > /dev/null
stats "buddy sessions (201 sessions on disk)" "$WORK/list.json"
BIG=$(cat big-session-id)
hyperfine -N --warmup 3 --runs 30 --export-json "$WORK/resume.json" "$BUDDY exec --resume $BIG hi" > /dev/null
stats "buddy exec --resume (5,000 messages, 20 MB)" "$WORK/resume.json"
rss "buddy exec --resume peak RSS" 5 "$BUDDY" exec --resume "$BIG" hi
cd - > /dev/null

# Edits: placed correctly / refused / wrongly over real source files, exact
# matching alone and with the normalisation passes; edit_file on 10 MB.
if [ -z "$ONLY" ]; then
(cd "$OLDPWD_REPO" && HOME="$REAL_HOME" cargo bench --quiet --bench edit 2>/dev/null)
fi

# REPL: keystroke-to-redraw at library level, then the time from starting
# `buddy` in a tmux pane until its prompt is on the screen, against the same
# measurement for a shell that only prints "> " (tmux's own share).
(cd "$OLDPWD_REPO" && HOME="$REAL_HOME" cargo bench --quiet --bench repl 2>/dev/null)
cd "$WORK/plain"
python3 - "$BUDDY" <<'PY'
import os, statistics, subprocess, sys, time
buddy = sys.argv[1]
sock = os.path.join(os.getcwd(), "bench-tmux.sock")
def first_prompt(cmd):
    t0 = time.perf_counter()
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "100", "-y", "30", cmd], check=True)
    while True:
        screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
        if any(l.rstrip() == ">" for l in screen.splitlines()):
            dt = time.perf_counter() - t0
            break
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    time.sleep(0.05)
    return dt * 1000
for label, cmd in (("tmux + printf '> ' (baseline)", "printf '> '; sleep 30"), ("tmux + buddy until its prompt shows", buddy)):
    t = sorted(first_prompt(cmd) for _ in range(30))
    print(f"{label:<44} min {t[0]:8.2f} ms   median {statistics.median(t):8.2f} ms   (30 runs)")
PY
cd - > /dev/null
fi

# Discovery: `buddy exec` with no key probes the local-server list before
# giving up. Four ports nothing listens on, against the same run with
# discovery off; the difference is the probe's cost.
if [ -z "$ONLY" ] || [ "$ONLY" = discovery ]; then
    ports=$(python3 -c 'import socket; s=[socket.socket() for _ in range(4)]; [x.bind(("127.0.0.1",0)) for x in s]; print(",".join("\"127.0.0.1:%d\"" % x.getsockname()[1] for x in s))')
    for mode in on off; do
        mkdir -p "$WORK/discovery-$mode"
        if [ $mode = on ]; then list=$ports; else list=; fi
        printf '[discovery]\nlocal_servers = [%s]\n' "$list" > "$WORK/discovery-$mode/buddy.toml"
        # -i: buddy exits 2 (no key, no server) by design here.
        (cd "$WORK/discovery-$mode" && env -u OPENAI_API_KEY -u BUDDY_API_KEY \
            hyperfine -N -i --warmup 20 --runs 300 --export-json "$WORK/discovery-$mode.json" "$BUDDY exec hello" > /dev/null 2>&1)
    done
    stats "buddy exec, no key, probe of 4 closed ports" "$WORK/discovery-on.json"
    stats "buddy exec, no key, discovery off" "$WORK/discovery-off.json"
    python3 - "$WORK/discovery-on.json" "$WORK/discovery-off.json" <<'PY'
import json, statistics, sys
t = lambda p: json.load(open(p))["results"][0]["times"]
on, off = t(sys.argv[1]), t(sys.argv[2])
for name, f in (("min", min), ("median", statistics.median)):
    print(f"{'the probe itself (' + name + ')':<44} {(f(on) - f(off)) * 1000:8.2f} ms")
PY
fi
[ "$ONLY" = discovery ] && exit 0

# Wire protocols: the same plain answer through each protocol's profile.
if [ -z "$ONLY" ] || [ "$ONLY" = protocols ]; then
    for api in completions responses messages; do
        mkdir -p "$WORK/proto-$api"
        printf '[agent]\nmodel = "p"\n[models.p]\napi_base_url = "%s"\napi = "%s"\nmodel = "fake-model"\n' \
            "$(head -n1 "$WORK/plain.url")" "$api" > "$WORK/proto-$api/buddy.toml"
        (cd "$WORK/proto-$api" && hyperfine -N --warmup 20 --runs 300 --export-json "$WORK/proto-$api.json" "$BUDDY exec hi" > /dev/null)
        stats "buddy exec (plain answer, api = $api)" "$WORK/proto-$api.json"
    done
fi
[ "$ONLY" = protocols ] && exit 0

# Real server: llama.cpp's llama-server with SmolLM2-135M (as in
# tests/real_server.rs), started with the shared start.sh. Each run of buddy is
# timed from start to exit; the server's own time for the same run is the sum
# of prompt_ms + predicted_ms over the requests it served, which it logs per
# request (the numbers it also sends as `timings`). The difference is buddy's
# share: process start, config, HTTP, SSE parsing, the tool, the session file,
# plus the server's own unmetered work (HTTP, chat template, tokenising).
if [ -z "$ONLY" ] || [ "$ONLY" = realserver ]; then
    RS_DIR=${BUDDY_REAL_SERVER_DIR:-$REAL_HOME/.cache/buddy-real-server}
    if [ -x "$RS_DIR/bin/llama-server" ] && [ -f "$RS_DIR/model.gguf" ]; then
        RS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        # The tests' arguments and chat template (scripts/real-server.d/); the
        # pid goes beside the others so the exit trap stops the server.
        "$OLDPWD_REPO/scripts/real-server" --start --port "$RS_PORT" "$RS_DIR" >&2
        cp "$RS_DIR/server.$RS_PORT.pid" "$WORK/realserver.pid"
        curl -sf -o /dev/null "http://127.0.0.1:$RS_PORT/health" || { echo "llama-server did not start; see $RS_DIR/server.$RS_PORT.log" >&2; exit 1; }
        python3 - "$BUDDY" "$WORK/real" "$RS_PORT" "$RS_DIR/server.$RS_PORT.log" "${REAL_RUNS:-5}" <<'PY'
import json, os, re, statistics, subprocess, sys, time
buddy, work, port, log, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
os.makedirs(work, exist_ok=True)
def config(time_tool):
    return f"""[agent]
model = "real"
temperature = 0
max_iterations = 4
[models.real]
api_base_url = "http://127.0.0.1:{port}/v1"
model = "smollm2"
max_tokens = 48
context_limit = 4096
[network]
api_timeout_secs = 280
[tools]
shell_enabled = false
files_enabled = false
fetch_enabled = false
search_enabled = false
time_enabled = {str(time_tool).lower()}
"""
# The tool loop resumes a session seeded with five time-tool exchanges, as the
# test does; it is written afresh before every run so each run sends the same.
sid = "20250101-000000-5eed"
seed = [{"header": {"version": 1, "id": sid, "created": 0, "cwd": "/"}}]
for i, q in enumerate(["What time is it?", "Which year is it?", "What is today's date?",
                       "What day of the week is it?", "Is it morning or evening?"]):
    seed += [{"message": {"role": "user", "content": q}},
             {"message": {"role": "assistant", "content": None, "tool_calls": [
                 {"id": f"seed{i}", "type": "function", "function": {"name": "time", "arguments": "{}"}}]}},
             {"message": {"role": "tool", "tool_call_id": f"seed{i}", "content": "utc_rfc3339: 2024-03-05T10:00:00.000Z"}},
             {"message": {"role": "assistant", "content": "Done."}}]
def served(text):
    # llama-server logs "prompt eval time = X ms" and "eval time = Y ms" per request.
    p = [float(x) for x in re.findall(r"prompt eval time =\s*([\d.]+) ms", text)]
    e = [float(x) for x in re.findall(r"\s eval time =\s*([\d.]+) ms", text)]
    return p, e
def run(name, args, time_tool, requests_expected=None):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "buddy.toml"), "w").write(config(time_tool))
    walls, servers, reqs = [], [], []
    for _ in range(runs):
        if time_tool:
            sd = os.path.join(d, ".buddyx", "sessions")
            os.makedirs(sd, mode=0o700, exist_ok=True)
            path = os.path.join(sd, sid + ".jsonl")
            open(path, "w").write("".join(json.dumps(l) + "\n" for l in seed))
            os.chmod(path, 0o600)
        before = os.path.getsize(log)
        t0 = time.perf_counter()
        out = subprocess.run([buddy, *args], cwd=d, capture_output=True, text=True)
        wall = (time.perf_counter() - t0) * 1000
        if out.returncode != 0:
            sys.exit(f"buddy failed ({name}): {out.stderr}")
        events = [json.loads(l) for l in out.stdout.splitlines()]
        n = sum(1 for e in events if e["type"] == "model_request")
        if time_tool and not any(e["type"] == "tool_call" for e in events):
            sys.exit(f"the model called no tool ({name}): {out.stdout}")
        # The server logs a request's timings as it releases the slot, just
        # after the last bytes went out: wait until all n are in the log.
        deadline = time.monotonic() + 30
        while True:
            with open(log) as f:
                f.seek(before)
                p, e = served(f.read())
            if len(p) >= n and len(e) >= n or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if len(p) < n or len(e) < n:
            sys.exit(f"the server logged {len(p)} of {n} requests")
        walls.append(wall)
        servers.append(sum(p[:n]) + sum(e[:n]))
        reqs.append(n)
    return walls, servers, reqs
cases = [("plain answer, streamed", "plain", ["exec", "--json", "What is the capital of France?"], False),
         ("tool loop (time), streamed", "loop", ["exec", "--json", "--resume", sid, "What time is it now?"], True)]
for label, name, args, tool in cases:
    walls, servers, reqs = run(name, args, tool)
    share = [w - s for w, s in zip(walls, servers)]
    med = statistics.median
    print(f"{'real server, ' + label:<44} buddy wall {med(walls):8.1f} ms   server timings {med(servers):8.1f} ms   "
          f"rest {med(share):7.1f} ms ({med(share) / med(walls) * 100:4.1f} %)   medians, {runs} runs, {med(reqs):.0f} request(s)")
    print(f"{'':<44} min: wall {min(walls):8.1f} ms   server {min(servers):8.1f} ms   rest {min(share):7.1f} ms")
PY
    else
        echo "real-server figures skipped: build it with scripts/real-server"
        [ "$ONLY" = realserver ] && exit 1
    fi
fi
[ "$ONLY" = realserver ] && exit 0

# Execution targets: for each, `exec` with a plain answer and `exec` with the
# 20 x run_shell "true" loop; (loop - plain) / 20 is one tool round trip
# through that target, setup (connection check, tmux session) excluded.
per_call() {
    python3 - "$1" "$2" "$3" <<'PY'
import json, statistics, sys
label, plain, loop = sys.argv[1:4]
t = lambda p: json.load(open(p))["results"][0]["times"]
for name, f in (("min", min), ("median", statistics.median)):
    print(f"{label + ' (' + name + ')':<44} {(f(t(loop)) - f(t(plain))) / 20 * 1000:8.2f} ms per call")
PY
}
# target LABEL RUNS ARGS...: times plain and loop with these extra arguments.
target() {
    label=$1; runs=$2; shift 2
    (cd "$WORK/plain" && hyperfine -N --warmup 2 --runs "$runs" --export-json "$WORK/t-plain.json" "$BUDDY exec $* hi" > /dev/null)
    (cd "$WORK/loop" && hyperfine -N --warmup 2 --runs "$runs" --export-json "$WORK/t-loop.json" "$BUDDY exec $* loop" > /dev/null)
    per_call "$label" "$WORK/t-plain.json" "$WORK/t-loop.json"
}
target "run_shell true, direct" 40
# The auto-approve default confines each command with the Landlock wrapper.
target "run_shell true, direct, sandboxed" 40 --dangerously-auto-approve
export TMUX_TMPDIR="$WORK/tmux"
mkdir -p "$TMUX_TMPDIR"
target "run_shell true, tmux-backed" 20 --tmux=bench
tmux kill-server 2>/dev/null || true
unset TMUX_TMPDIR

# SSH: a private sshd on loopback, logging in as the tests' second user,
# whose login shell starts plainly (root's .bashrc here costs ~0.4 s per
# command, which is not buddy's). sshd needs root, as in the tests.
if [ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ]; then
    id buddytest >/dev/null 2>&1 || useradd -m -s /bin/bash buddytest
    usermod -p '*' buddytest
    mkdir -p /run/sshd "$WORK/sshd"
    chmod 755 "$WORK"   # sshd reads the key file as buddytest
    ssh-keygen -q -t ed25519 -N '' -f "$WORK/sshd/host"
    ssh-keygen -q -t ed25519 -N '' -f "$WORK/sshd/client"
    cp "$WORK/sshd/client.pub" "$WORK/sshd/authorized"
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    cat > "$WORK/sshd/config" <<CONF
ListenAddress 127.0.0.1:$PORT
HostKey $WORK/sshd/host
PidFile $WORK/sshd.pid
AuthorizedKeysFile $WORK/sshd/authorized
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin no
CONF
    /usr/sbin/sshd -f "$WORK/sshd/config"
    sleep 0.5
    SSH="--ssh buddytest@127.0.0.1:$PORT --ssh-option IdentityFile=$WORK/sshd/client --ssh-option StrictHostKeyChecking=no --ssh-option UserKnownHostsFile=/dev/null --ssh-option LogLevel=ERROR"
    target "run_shell true, SSH multiplexed" 20 $SSH
    target "run_shell true, SSH without multiplexing" 10 $SSH --ssh-option ControlMaster=no --ssh-option ControlPath=none
else
    echo "SSH figures skipped: sshd needs root"
fi
