// An editor's side of ACP for tests/acp.rs: the real TypeScript client
// library (@agentclientprotocol/sdk, installed by scripts/mcp-servers)
// starts `buddy acp`, plays one scenario and prints what it saw as one JSON
// object on stdout. buddy's stderr passes through to ours.
//
//   node client.mjs SCENARIO
//   env: ACP_TEST_SDK (the SDK's entry file), ACP_TEST_BUDDY (the binary),
//        ACP_TEST_SESSION (for `load` and `sessions`), ACP_TEST_FILE (for
//        `files`), ACP_TEST_PROMPT (the first prompt of `overflow`, the
//        prompt of `commands`)
//
// In `elicitation` the client draws forms (`elicitation.form`): it keeps
// the question it is asked in `elicitation` and answers with `name` set
// to "Editor" and `count` to 3, the other fields left to their defaults.
//
// In `terminal` the client offers terminals and runs each command it is
// asked to itself (sh is started with the program and arguments given),
// recording them in `terminals`.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdk = await import(pathToFileURL(process.env.ACP_TEST_SDK).href);
const { client, methods, ndJsonStream, PROTOCOL_VERSION } = sdk;

const scenario = process.argv[2];
const seen = {
  updates: [],
  permissions: [],
  stops: [],
  errors: [],
  reads: [],
  writes: [],
  terminals: [],
};
// Answers to permission questions, in order, by option kind.
const answers = [];
// The editor's unsaved buffers, by absolute path.
const buffers = new Map();
let onUpdate = () => {};

const env = { ...process.env };
delete env.ACP_TEST_SDK;
delete env.ACP_TEST_BUDDY;
const child = spawn(process.env.ACP_TEST_BUDDY, ["acp"], {
  stdio: ["pipe", "pipe", "inherit"],
  env,
});
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const app = client({ name: "buddy-acp-test" })
  .onNotification(methods.client.session.update, (ctx) => {
    seen.updates.push(ctx.params.update);
    onUpdate(ctx.params.update);
  })
  .onRequest(methods.client.session.requestPermission, (ctx) => {
    seen.permissions.push(ctx.params);
    const kind = answers.shift() ?? "reject_once";
    const option = ctx.params.options.find((o) => o.kind === kind);
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onRequest(methods.client.fs.readTextFile, (ctx) => {
    seen.reads.push(ctx.params.path);
    const text = buffers.get(ctx.params.path) ?? readFileSync(ctx.params.path, "utf8");
    return { content: text };
  })
  .onRequest(methods.client.fs.writeTextFile, (ctx) => {
    seen.writes.push({ path: ctx.params.path, content: ctx.params.content });
    buffers.set(ctx.params.path, ctx.params.content);
    return {};
  })
  // A terminal runs to its end when it is created (the test's commands are
  // short); its output and exit are kept for the requests that follow.
  .onRequest(methods.client.terminal.create, (ctx) => {
    const { command, args, cwd } = ctx.params;
    const run = spawnSync(command, args ?? [], { cwd, encoding: "utf8" });
    const terminalId = `term-${seen.terminals.length + 1}`;
    seen.terminals.push({
      terminalId,
      command,
      args,
      cwd,
      output: (run.stdout ?? "") + (run.stderr ?? ""),
      exitStatus: { exitCode: run.status, signal: run.signal },
      calls: ["create"],
    });
    return { terminalId };
  })
  .onRequest(methods.client.terminal.waitForExit, (ctx) => {
    const t = terminal(ctx.params.terminalId, "wait_for_exit");
    return t.exitStatus;
  })
  .onRequest(methods.client.terminal.output, (ctx) => {
    const t = terminal(ctx.params.terminalId, "output");
    return { output: t.output, truncated: false, exitStatus: t.exitStatus };
  })
  .onRequest(methods.client.terminal.kill, (ctx) => {
    terminal(ctx.params.terminalId, "kill");
    return {};
  })
  .onRequest(methods.client.terminal.release, (ctx) => {
    terminal(ctx.params.terminalId, "release");
    return {};
  })
  .onRequest(methods.client.elicitation.create, (ctx) => {
    seen.elicitation = ctx.params;
    const content = {};
    for (const [name, field] of Object.entries(ctx.params.requestedSchema?.properties ?? {})) {
      if (field.default !== undefined) content[name] = field.default;
    }
    content.name = "Editor";
    content.count = 3;
    return { action: "accept", content };
  });

function terminal(id, call) {
  const t = seen.terminals.find((t) => t.terminalId === id);
  if (!t) throw new Error(`no terminal ${id}`);
  t.calls.push(call);
  return t;
}

const files = scenario === "files";
await app.connectWith(stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: {
      fs: { readTextFile: files, writeTextFile: files },
      terminal: scenario === "terminal",
      ...(scenario === "elicitation" ? { elicitation: { form: {} } } : {}),
    },
  });
  seen.initialize = init;
  const cwd = process.cwd();
  const prompt = async (sessionId, text) => {
    try {
      const r = await agent.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text }],
      });
      seen.stops.push(r.stopReason);
    } catch (e) {
      seen.errors.push(String(e?.message ?? e));
    }
  };
  if (scenario === "load") {
    const sessionId = process.env.ACP_TEST_SESSION;
    await agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
    seen.sessionId = sessionId;
    // Everything replayed came before the answer.
    seen.replayed = seen.updates.length;
    return;
  }
  if (scenario === "sessions") {
    // Listed, resumed without a replay, closed, then gone.
    seen.list = await agent.request(methods.agent.session.list, { cwd });
    const sessionId = process.env.ACP_TEST_SESSION;
    const before = seen.updates.length;
    seen.resumed = await agent.request(methods.agent.session.resume, {
      sessionId,
      cwd,
      mcpServers: [],
    });
    seen.replayedOnResume = seen.updates
      .slice(before)
      .filter((u) => u.sessionUpdate !== "available_commands_update").length;
    await prompt(sessionId, "and now");
    seen.closed = await agent.request(methods.agent.session.close, { sessionId });
    try {
      await agent.request(methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "still there?" }],
      });
      seen.afterClose = "answered";
    } catch (e) {
      seen.afterClose = e?.code ?? String(e);
    }
    return;
  }
  const opened = await agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
  const { sessionId } = opened;
  seen.sessionId = sessionId;
  seen.modes = opened.modes;
  switch (scenario) {
    case "tool":
    case "answer":
      await prompt(sessionId, "list the files");
      break;
    case "permission":
      answers.push("allow_once");
      await prompt(sessionId, "create allowed.txt");
      answers.push("reject_once");
      await prompt(sessionId, "create rejected.txt");
      break;
    case "cancel":
      onUpdate = (u) => {
        if (u.sessionUpdate === "agent_message_chunk") {
          onUpdate = () => {};
          agent.notify(methods.agent.session.cancel, { sessionId });
        }
      };
      await prompt(sessionId, "tell me a long story");
      break;
    case "overflow":
      await prompt(sessionId, process.env.ACP_TEST_PROMPT);
      await prompt(sessionId, "a small follow-up");
      break;
    case "modes":
      // Asked first in the default mode, then the same kinds of call in
      // auto-edit, where only the command is asked about.
      answers.push("allow_once", "allow_once", "allow_once");
      await prompt(sessionId, "edit then run, asked");
      seen.permissionsBeforeMode = seen.permissions.length;
      seen.setMode = await agent.request(methods.agent.session.setMode, {
        sessionId,
        modeId: "auto-edit",
      });
      await prompt(sessionId, "edit then run, in auto-edit");
      try {
        await agent.request(methods.agent.session.setMode, { sessionId, modeId: "no-such-mode" });
        seen.badMode = "accepted";
      } catch (e) {
        seen.badMode = e?.code ?? String(e);
      }
      break;
    case "plan-mode":
      // In the plan mode a change is refused without a question.
      seen.setMode = await agent.request(methods.agent.session.setMode, {
        sessionId,
        modeId: "plan",
      });
      await prompt(sessionId, "plan first");
      break;
    case "subagent":
      // A child asks through the parent's editor; the answer lets it write.
      answers.push("allow_once");
      await prompt(sessionId, "have a helper make the file");
      break;
    case "plan-accepted":
      // The plan is accepted: the mode goes back to the default by itself.
      seen.setMode = await agent.request(methods.agent.session.setMode, {
        sessionId,
        modeId: "plan",
      });
      answers.push("allow_once", "allow_once");
      await prompt(sessionId, "plan, then work");
      break;
    case "commands":
      await prompt(sessionId, process.env.ACP_TEST_PROMPT);
      break;
    case "terminal":
      answers.push("allow_once");
      await prompt(sessionId, "run it in the editor");
      break;
    case "elicitation":
      answers.push("allow_once");
      await prompt(sessionId, "order for me");
      break;
    case "files":
      buffers.set(process.env.ACP_TEST_FILE, "unsaved text\n");
      answers.push("allow_once");
      await prompt(sessionId, "edit the file");
      seen.buffer = buffers.get(process.env.ACP_TEST_FILE);
      break;
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
});
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
seen.exit = await exited;
clearTimeout(timer);
process.stdout.write(JSON.stringify(seen) + "\n");
