// An editor's side of ACP for tests/acp.rs: the real TypeScript client
// library (@agentclientprotocol/sdk, installed by scripts/mcp-servers)
// starts `buddy acp`, plays one scenario and prints what it saw as one JSON
// object on stdout. buddy's stderr passes through to ours.
//
//   node client.mjs SCENARIO
//   env: ACP_TEST_SDK (the SDK's entry file), ACP_TEST_BUDDY (the binary),
//        ACP_TEST_SESSION (for `load`), ACP_TEST_FILE (for `files`),
//        ACP_TEST_PROMPT (the first prompt of `overflow`)
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const sdk = await import(pathToFileURL(process.env.ACP_TEST_SDK).href);
const { client, methods, ndJsonStream, PROTOCOL_VERSION } = sdk;

const scenario = process.argv[2];
const seen = { updates: [], permissions: [], stops: [], errors: [], reads: [], writes: [] };
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
  });

const files = scenario === "files";
await app.connectWith(stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: files, writeTextFile: files } },
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
  const { sessionId } = await agent.request(methods.agent.session.new, { cwd, mcpServers: [] });
  seen.sessionId = sessionId;
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
