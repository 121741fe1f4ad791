// A second, independent ACP client: the official TypeScript SDK's client app drives the real daemon
// (`python -m toycoder_daemon --acp`) through one scripted scenario, records every frame in both
// directions at the byte level, and checks each against the ACP JSON Schema (validate.mjs).
//
//   node scenario.mjs SETUP.json   (written by tests/test_acp_ts_client.py, which scripts the model)
//
// The client is what an editor would be: fs/* from an in-memory map of buffers (one unsaved),
// terminal/* with real child processes, permission answered allow_once, one stdio MCP server given in
// session/new. The report (frames, violations, what each step answered) goes to setup.report; the
// pytest side asserts on it. The exit status is 0 when the scenario ran to its end.
import { spawn } from "node:child_process";
import { openSync, readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { PROTOCOL_VERSION, RequestError, client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import { FrameValidator } from "./validate.mjs";

const setup = JSON.parse(readFileSync(process.argv[2], "utf8"));
const SCALE = Number(process.env.TOYCODER_TEST_TIMEOUT_SCALE || "1");
const frames = []; // {from: "agent" | "client", msg}, in wire order
const steps = {}; // what each step of the scenario answered, for the pytest side

// ---- the wire, recorded -----------------------------------------------------------------------

/** Passes bytes through unchanged and records each complete line as a frame from `from`. */
function recorder(from) {
  const decoder = new TextDecoder();
  let pending = "";
  const record = (line) => {
    if (!line.trim()) return;
    try {
      frames.push({ from, msg: JSON.parse(line) });
    } catch {
      frames.push({ from, msg: line, unparsable: true });
    }
  };
  return new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = pending.indexOf("\n")) >= 0) {
        record(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
      }
      controller.enqueue(chunk);
    },
    flush() {
      record(pending);
    },
  });
}

async function waitFor(pred, what, seconds = 20) {
  const deadline = Date.now() + seconds * SCALE * 1000;
  while (!frames.some(pred)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const update = (kind) => (f) => f.from === "agent" && f.msg.method === "session/update" && f.msg.params?.update?.sessionUpdate === kind;
const request = (method) => (f) => f.from === "agent" && f.msg.method === method && "id" in f.msg;

// ---- the client's side: buffers, terminals, permission -----------------------------------------

const buffers = new Map(Object.entries(setup.buffers)); // path -> text the editor holds (unsaved)
const terminals = new Map();
let terminalIds = 0;

function diskOrBuffer(path) {
  if (buffers.has(path)) return buffers.get(path);
  try {
    return readFileSync(path, "utf8");
  } catch {
    throw RequestError.resourceNotFound(path);
  }
}

function startTerminal({ command, args = [], env = [], cwd, outputByteLimit }) {
  const child = spawn(command, args, {
    cwd: cwd ?? undefined,
    env: { ...process.env, ...Object.fromEntries(env.map((e) => [e.name, e.value])) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const t = { child, output: Buffer.alloc(0), truncated: false, exit: null };
  const keep = (chunk) => {
    t.output = Buffer.concat([t.output, chunk]);
    if (outputByteLimit != null && t.output.length > outputByteLimit) {
      t.output = t.output.subarray(t.output.length - outputByteLimit);
      t.truncated = true;
    }
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  t.exited = new Promise((resolve) => child.on("close", (code, signal) => resolve((t.exit = { exitCode: code, signal }))));
  const id = `term-${++terminalIds}`;
  terminals.set(id, t);
  return id;
}

const app = client({ name: "toycoder-acp-ts-client" })
  .onNotification(methods.client.session.update, () => {}) // read from the recorded frames, in wire order
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest(methods.client.fs.readTextFile, ({ params }) => ({ content: diskOrBuffer(params.path) }))
  .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
    buffers.set(params.path, params.content); // the editor's buffer; it saves when the person says so
    return {};
  })
  .onRequest(methods.client.terminal.create, ({ params }) => ({ terminalId: startTerminal(params) }))
  .onRequest(methods.client.terminal.output, ({ params }) => {
    const t = terminals.get(params.terminalId);
    return { output: t.output.toString("utf8"), truncated: t.truncated, ...(t.exit ? { exitStatus: t.exit } : {}) };
  })
  .onRequest(methods.client.terminal.waitForExit, async ({ params }) => terminals.get(params.terminalId).exited)
  .onRequest(methods.client.terminal.kill, ({ params }) => {
    terminals.get(params.terminalId).child.kill("SIGTERM");
    return {};
  })
  .onRequest(methods.client.terminal.release, ({ params }) => {
    const t = terminals.get(params.terminalId);
    if (!t.exit) t.child.kill("SIGTERM");
    terminals.delete(params.terminalId);
    return {};
  });

// ---- the scenario -------------------------------------------------------------------------------

const text = (t) => [{ type: "text", text: t }];

async function expectError(what, promise) {
  try {
    await promise;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
  throw new Error(`${what} was expected to fail`);
}

async function scenario(agent) {
  const cwd = setup.workspace;
  const sessions = async () => (await agent.request(methods.agent.session.list, { cwd })).sessions.map((s) => s.sessionId);
  steps.initialize = await agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
    clientInfo: { name: "toycoder-acp-ts-client", version: "0.0.0" },
  });
  const created = await agent.request(methods.agent.session.new, { cwd, mcpServers: [setup.mcpServer] });
  const sessionId = created.sessionId;
  steps.new = created;

  // one turn: the planner seeds the plan, the model reads the unsaved buffer, edits it (asked, with
  // locations; written through fs/write_text_file), runs a command in our terminal, calls the MCP tool
  steps.firstTurn = await agent.request(methods.agent.session.prompt, { sessionId, prompt: text("plan and add subtract") });
  await waitFor(update("session_info_update"), "the title after the first turn");

  for (const modeId of ["read-only", "accept-edits"]) {
    await agent.request(methods.agent.session.setMode, { sessionId, modeId });
    await waitFor((f) => update("current_mode_update")(f) && f.msg.params.update.currentModeId === modeId, `mode ${modeId}`);
    steps[modeId] = await agent.request(methods.agent.session.prompt, { sessionId, prompt: text(`write in ${modeId}`) });
  }

  await agent.request(methods.agent.session.close, { sessionId });
  steps.promptAfterClose = await expectError("a prompt after session/close",
    agent.request(methods.agent.session.prompt, { sessionId, prompt: text("still there?") }));
  steps.resume = await agent.request(methods.agent.session.resume, { sessionId, cwd, mcpServers: [] });
  steps.resumed = await agent.request(methods.agent.session.prompt, { sessionId, prompt: text("after resume") });
  steps.load = await agent.request(methods.agent.session.load, { sessionId, cwd, mcpServers: [] }); // replays

  // a command cancelled while it runs in our terminal: terminal/kill, then terminal/release
  const turn = agent.request(methods.agent.session.prompt, { sessionId, prompt: text("wait a bit") });
  await waitFor((f) => request("terminal/create")(f) && JSON.stringify(f.msg.params).includes(setup.sleepCommand),
    "the long command in the client's terminal");
  await agent.notify(methods.agent.session.cancel, { sessionId });
  steps.cancelled = await turn;
  await waitFor(request("terminal/release"), "the cancelled command's terminal/release");

  // issue 33: config options, fork (whole and before the second turn), the list without cwd
  steps.setConfigOption = await agent.request(methods.agent.session.setConfigOption,
    { sessionId, configId: "model", value: steps.resume.configOptions[0].currentValue });
  steps.fork = await agent.request("session/fork", { sessionId, cwd, mcpServers: [] });
  steps.forkEarly = await agent.request("session/fork",
    { sessionId, cwd, mcpServers: [], _meta: { toycoder: { atTurn: 1 } } });
  steps.listedAll = (await agent.request(methods.agent.session.list, {})).sessions.map((s) => s.sessionId);
  for (const fork of [steps.fork.sessionId, steps.forkEarly.sessionId]) {
    await agent.request(methods.agent.session.delete, { sessionId: fork });
  }

  steps.listedBeforeDelete = await sessions();
  steps.delete = await agent.request(methods.agent.session.delete, { sessionId });
  steps.listedAfterDelete = await sessions();
  steps.sessionId = sessionId;
}

// ---- the validator catches what it should: real frames, each broken in one place ------------------

function mutants() {
  const v = new FrameValidator();
  const copy = (f) => structuredClone(f);
  const first = (pred) => frames.find(pred);
  const answerTo = (req) => frames.find((f) => f.from !== req.from && f.msg.id === req.msg.id && !("method" in f.msg));
  const cases = {
    "a plan entry with priority 'urgent'": [first(update("plan")), (m) => { m.params.update.entries[0].priority = "urgent"; }],
    "a permission request without options": [first(request("session/request_permission")), (m) => { delete m.params.options; }],
    "a mode update with a numeric mode id": [first(update("current_mode_update")), (m) => { m.params.update.currentModeId = 42; }],
    "a tool call without its id": [first(update("tool_call")), (m) => { delete m.params.update.toolCallId; }],
    "an unknown update kind": [first(update("plan")), (m) => { m.params.update.sessionUpdate = "todo_list"; }],
  };
  const caught = {};
  for (const [what, [frame, breakIt]] of Object.entries(cases)) {
    const before = v.violations.length;
    const broken = copy(frame);
    breakIt(broken.msg);
    v.validate(broken);
    caught[what] = v.violations.length > before;
  }
  // a response: its request first (valid), then the answer without its sessionId
  const created = first((f) => f.from === "client" && f.msg.method === "session/new");
  const before = v.violations.length;
  v.validate(copy(created));
  const answer = copy(answerTo(created));
  delete answer.msg.result.sessionId;
  v.validate(answer);
  caught["a session/new answer without its sessionId"] = v.violations.length === before + 1;
  return caught;
}

// ---- run it -------------------------------------------------------------------------------------

const daemon = spawn(setup.python, ["-m", "toycoder_daemon", "--acp", "--config", setup.config, "--log-level", "INFO"], {
  cwd: setup.repoRoot,
  env: process.env,
  stdio: ["pipe", "pipe", openSync(setup.log, "w")],
});
const exited = new Promise((resolve) => daemon.on("exit", (code, signal) => resolve({ code, signal })));
const toDaemon = recorder("client");
toDaemon.readable.pipeTo(Writable.toWeb(daemon.stdin)).catch(() => {});
const stream = ndJsonStream(toDaemon.writable, Readable.toWeb(daemon.stdout).pipeThrough(recorder("agent")));

let failure = null;
try {
  await app.connectWith(stream, scenario);
} catch (e) {
  failure = String(e?.stack ?? e) + (e?.data ? `\ndata: ${JSON.stringify(e.data)}` : "");
}
daemon.stdin.end(); // closing stdin ends the daemon
const timer = setTimeout(() => daemon.kill("SIGKILL"), 15_000 * SCALE);
const exit = await exited;
clearTimeout(timer);
for (const t of terminals.values()) if (!t.exit) t.child.kill("SIGKILL");

const validator = new FrameValidator();
for (const f of frames) {
  if (f.unparsable) validator.violation(f, "not JSON");
  else validator.validate(f);
}
const report = { steps, failure, exit, buffers: Object.fromEntries(buffers), frames,
  validated: validator.count, violations: validator.violations, mutants: mutants() };
writeFileSync(setup.report, JSON.stringify(report, null, 1));
console.log(`${validator.count} frames validated against the ACP schema, ${validator.violations.length} violations`);
process.exit(failure ? 1 : 0);
