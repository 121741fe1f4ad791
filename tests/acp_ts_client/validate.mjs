// Checks JSON-RPC frames against the ACP JSON Schema the SDK ships (schema/v1/schema.unstable.json, the
// v1 profile with the methods still marked unstable, such as session/fork, which the daemon serves): each frame against its side's envelope ("Agent" or "Client" at the schema's root), and
// its params or result against the definition for its method and direction, found by the schema's own
// `x-method` / `x-side` annotations (so no method table is copied here).
import { createRequire } from "node:module";
import Ajv2020 from "ajv/dist/2020.js";

const require = createRequire(import.meta.url);
// the unstable profile: a superset of the stable one with the methods ACP still calls unstable that
// we serve (session/fork)
const SCHEMA = require("@agentclientprotocol/sdk/schema/v1/schema.unstable.json");
const KEY = "acp-v1.json";

// The schema's numeric formats are Rust's; ajv knows none of them, so they are checked here.
const INT = (lo, hi) => ({ type: "number", validate: (n) => Number.isInteger(n) && n >= lo && n <= hi });
const FORMATS = {
  int32: INT(-(2 ** 31), 2 ** 31 - 1),
  uint16: INT(0, 2 ** 16 - 1),
  uint32: INT(0, 2 ** 32 - 1),
  int64: INT(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),
  uint64: INT(0, Number.MAX_SAFE_INTEGER),
  double: { type: "number", validate: (n) => Number.isFinite(n) },
  uri: { type: "string", validate: (s) => URL.canParse(s) },
};

function annotations(node, found = new Set()) {
  if (Array.isArray(node)) node.forEach((n) => annotations(n, found));
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k.startsWith("x-")) found.add(k);
      annotations(v, found);
    }
  }
  return found;
}

export class FrameValidator {
  constructor() {
    // strict: an unknown keyword or format is an error, not silently ignored; the schema's own
    // annotations (x-method, x-side, x-deserialize-*) and OpenAPI's `discriminator` (a hint beside
    // the oneOf that does the checking) are declared as the annotations they are.
    this.ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true, formats: FORMATS });
    this.ajv.addVocabulary([...annotations(SCHEMA), "discriminator"]);
    this.ajv.addSchema(SCHEMA, KEY);
    this.compiled = new Map();
    // (receiver side, kind, method) -> definition name, from the schema's annotations
    this.defs = new Map();
    for (const [name, def] of Object.entries(SCHEMA.$defs)) {
      const kind = ["Request", "Response", "Notification"].find((k) => name.endsWith(k));
      if (def["x-method"] && kind) this.defs.set(`${def["x-side"]} ${kind} ${def["x-method"]}`, name);
    }
    this.pending = { agent: new Map(), client: new Map() }; // requests each side has to answer: id -> method
    this.count = 0;
    this.violations = [];
  }

  check(ref, value) {
    let validate = this.compiled.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${KEY}#${ref}` });
      this.compiled.set(ref, validate);
    }
    return validate(value) ? [] : validate.errors.map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
  }

  definition(side, kind, method, frame) {
    const name = this.defs.get(`${side} ${kind} ${method}`);
    if (name) return `/$defs/${name}`;
    if (typeof method === "string" && method.startsWith("_")) return null; // an extension method: the envelope checks it
    this.violation(frame, `the schema has no ${kind} "${method}" handled by the ${side}`);
    return null;
  }

  violation(frame, ...problems) {
    this.violations.push({ from: frame.from, problems, frame: frame.msg });
  }

  /** frame: {from: "agent" | "client", msg}. Records a violation for each problem found. */
  validate(frame) {
    const { from, msg } = frame;
    const to = from === "agent" ? "client" : "agent";
    this.count += 1;
    const envelope = this.check(`/anyOf/${from === "agent" ? 0 : 1}`, msg);
    if (envelope.length) this.violation(frame, `not a valid ${from} message:`, ...envelope);
    if (!msg || typeof msg !== "object") return;
    let ref = null;
    let value;
    if (typeof msg.method === "string") {
      const kind = "id" in msg ? "Request" : "Notification";
      if (kind === "Request") this.pending[to].set(msg.id, msg.method);
      ref = this.definition(to, kind, msg.method, frame);
      value = msg.params;
    } else if ("id" in msg) {
      const method = this.pending[from].get(msg.id);
      if (method === undefined) return this.violation(frame, `a response to id ${JSON.stringify(msg.id)}, which no request of the ${to} had`);
      this.pending[from].delete(msg.id);
      if ("error" in msg) [ref, value] = ["/$defs/Error", msg.error];
      else [ref, value] = [this.definition(from, "Response", method, frame), msg.result];
      frame.method = method;
    }
    if (ref) {
      let problems = this.check(ref, value);
      if (problems.length && ref === "/$defs/SessionNotification") problems = this.updateProblems(value) ?? problems;
      if (problems.length) this.violation(frame, `${frame.method ?? msg.method}: not a valid ${ref.split("/").pop()}:`, ...problems);
    }
  }

  /** A failing update's problems against the one SessionUpdate variant its tag names (ajv reports
   * every variant of the oneOf otherwise); undefined for an unknown tag. */
  updateProblems(params) {
    const variants = SCHEMA.$defs.SessionUpdate.oneOf;
    const tag = params?.update?.sessionUpdate;
    const i = variants.findIndex((v) => v.properties?.sessionUpdate?.const === tag);
    if (i < 0) return undefined;
    return this.check(`/$defs/SessionUpdate/oneOf/${i}`, params.update).map((p) => `/update${p}`);
  }
}
